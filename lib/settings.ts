// The operator's settings of the deployed environments: everything an operator must choose
// (account, region, domains and certificates, alarm destinations, who may reach the gRPC endpoint,
// the `public` function's reserved concurrency), read from ONE JSON file that the CDK context key
// `settings` names: `npx cdk deploy -c settings=deploy/settings.json …`, or `"settings": "…"` in
// cdk.json's context. One section per environment (`sandbox`, `production`); no defaults.
// Everything else (sizes, limits, retention) is fixed per environment in lib/config.ts.
//
// Plain data (no aws-cdk-lib import): the admin CLI reads the region from here too.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { environmentConfig, environmentNames, stackName, type EnvironmentConfig, type EnvironmentName } from './config';
import { schemas, type EnvironmentSettings } from './settings-schema';

/** The context key that names the settings file. */
export const SETTINGS_CONTEXT_KEY = 'settings';
/** The committed example, with example values only: CI, `npm run synth` and the tests name it. */
export const EXAMPLE_SETTINGS_FILE = 'deploy/settings.example.json';
/** The admin CLI's way to name the settings file (else cdk.json's `settings`). */
export const SETTINGS_VARIABLE = 'SVCNUM_SETTINGS';

const repoFile = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

export type { EnvironmentSettings } from './settings-schema';

/** What each setting is, for the lines of a missing or invalid one. */
const meaning: Record<string, string> = {
  account: 'the AWS account id (12 digits)',
  region: 'the AWS region, e.g. eu-central-1',
  api: 'the API\'s custom domain: {"domainName", "certificateArn", optional "hostedZone"}',
  'api.domainName': 'where people sign in, e.g. id.example.org',
  'api.certificateArn': 'ACM certificate in the region covering api.domainName',
  grpc: 'the gRPC endpoint: {"domainName", "certificateArn", "allowedCidrs", optional "hostedZone"}',
  'grpc.domainName': "the gRPC endpoint's name, e.g. grpc.example.org",
  'grpc.certificateArn': 'ACM certificate in the region covering grpc.domainName',
  'grpc.allowedCidrs': 'who may reach the NLB on 443, e.g. ["203.0.113.0/24"] or ["0.0.0.0/0"]',
  alarms: 'where alarms go: {"emails": […], "httpsEndpoints": […], "topicArns": […]}, at least one',
  publicReservedConcurrency: 'reserved concurrency of the public function (docs/deploying.md, "Lambda concurrency")',
};

export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

export interface SettingsFile {
  /** As named (context or variable), for messages. */
  readonly path: string;
  /** The committed example: its example values warn instead of failing production. */
  readonly isExample: boolean;
  /** Each environment's section as written (unvalidated). */
  readonly sections: Partial<Record<EnvironmentName, unknown>>;
}

export function readSettingsFile(path: string, cwd = process.cwd()): SettingsFile {
  const absolute = resolve(cwd, path);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(absolute, 'utf8'));
  } catch (error) {
    throw new SettingsError(
      `settings file ${path}: ` +
        `${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (error as Error).message}`,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new SettingsError(`settings file ${path}: not a JSON object`);
  const unknown = Object.keys(parsed).filter(
    (key) => !key.startsWith('$') && !(environmentNames as readonly string[]).includes(key),
  );
  if (unknown.length)
    throw new SettingsError(
      `settings file ${path}: unknown section ${unknown.map((key) => `"${key}"`).join(', ')}` +
        ` (sections: ${environmentNames.join(', ')})`,
    );
  const sections = Object.fromEntries(
    environmentNames.filter((name) => name in parsed).map((name) => [name, (parsed as Record<string, unknown>)[name]]),
  );
  return { path, isExample: absolute === repoFile(EXAMPLE_SETTINGS_FILE), sections };
}

const valueAt = (value: unknown, path: readonly PropertyKey[]) =>
  path.reduce<unknown>(
    (node, key) =>
      node !== null && typeof node === 'object' ? (node as Record<PropertyKey, unknown>)[key] : undefined,
    value,
  );

/** The settings of one environment, or one line per missing or invalid setting. */
export function parseEnvironmentSettings(
  environment: EnvironmentName,
  section: unknown,
): { settings: EnvironmentSettings; problems: [] } | { settings?: undefined; problems: string[] } {
  const result = schemas[environment].safeParse(section ?? {});
  if (result.success) return { settings: result.data, problems: [] };
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.join('.');
    const where = `${environment}${path ? `.${path}` : ''}`;
    if (issue.code === 'unrecognized_keys')
      return `${where}: unknown setting ${issue.keys.map((key) => `"${key}"`).join(', ')}`;
    const generic = path.replace(/\.\d+(?=\.|$)/g, '');
    if (valueAt(section, issue.path) === undefined) return `${where}: missing: ${meaning[generic] ?? issue.message}`;
    return `${where}: ${issue.message}`;
  });
  return { problems };
}

const EXAMPLE_ACCOUNTS = new Set(['111111111111', '222222222222', '123456789012']);
const EXAMPLE_CERTIFICATE_ID = '00000000-0000-0000-0000-000000000000';
/** example.com/.net/.org (RFC 2606) and the .example top-level domain. */
const exampleName = (name: string) => /(^|\.)example(\.(com|net|org))?$/.test(name.toLowerCase());
const exampleHost = (url: string) => exampleName(url.replace(/^https:\/\//, '').split(/[/:?#]/)[0] ?? '');

/** The settings (as lib/config.ts holds them) that still look like examples: `path (value)` each. */
export function exampleValues(config: EnvironmentConfig): string[] {
  const found: string[] = [];
  const check = (path: string, value: string | undefined, looksLikeExample: (value: string) => boolean) => {
    if (value !== undefined && looksLikeExample(value)) found.push(`${path} (${value})`);
  };
  const arnAccount = (arn: string) => EXAMPLE_ACCOUNTS.has(arn.split(':')[4] ?? '');
  check('account', config.account, (value) => EXAMPLE_ACCOUNTS.has(value));
  const domain = config.http.customDomain;
  check('api.domainName', domain?.domainName, exampleName);
  check(
    'api.certificateArn',
    domain?.certificateArn,
    (arn) => arn.endsWith(`/${EXAMPLE_CERTIFICATE_ID}`) || arnAccount(arn),
  );
  check('grpc.domainName', config.provisioning.domainName, exampleName);
  check(
    'grpc.certificateArn',
    config.provisioning.certificateArn,
    (arn) => arn.endsWith(`/${EXAMPLE_CERTIFICATE_ID}`) || arnAccount(arn),
  );
  const exampleEmail = (value: string) => exampleName(value.split('@')[1] ?? '');
  for (const [index, email] of config.alarms.emails.entries()) check(`alarms.emails.${index}`, email, exampleEmail);
  for (const [index, url] of config.alarms.httpsEndpoints.entries())
    check(`alarms.httpsEndpoints.${index}`, url, exampleHost);
  for (const [index, arn] of config.alarms.topicArns.entries()) check(`alarms.topicArns.${index}`, arn, arnAccount);
  return found;
}

/** The settings file named in cdk.json's context (an operator's pointer to their own file), if any. */
export function settingsFileOfCdkJson(): string | undefined {
  const cdkJson = JSON.parse(readFileSync(repoFile('cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  const named = cdkJson.context?.[SETTINGS_CONTEXT_KEY];
  return typeof named === 'string' ? named : undefined;
}

/** Glob of the CDK CLI's stack selection (`*` within a path segment, `**` across). */
const selects = (pattern: string, name: string) =>
  new RegExp(
    `^${pattern
      .split('**')
      .map((part) =>
        part
          .split('*')
          .map((text) => text.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
          .join('[^/]*'),
      )
      .join('.*')}$`,
  ).test(name);

export interface ResolvedConfigs {
  readonly configs: Partial<Record<EnvironmentName, EnvironmentConfig>>;
  /** Environments left out (no section in the file, not selected by name): one line each. */
  readonly skipped: string[];
}

/**
 * The configuration of every environment the settings file has a section for. Throws one
 * SettingsError listing every problem, before any construct exists:
 * - no settings file named, or a section that is incomplete or invalid (one line per setting);
 * - production settings that look like examples (unless the file is the committed example);
 * - an environment without a section that the CDK CLI's selection names (`aws:cdk:bundling-stacks`
 *   names stacks only with `--exclusively`; otherwise it is `**` and such a stack is just not built,
 *   so `cdk deploy svcnum-sandbox` needs no production settings).
 */
export function resolveConfigs(
  settingsPath: string | undefined,
  selection: readonly string[] = ['**'],
  cwd = process.cwd(),
): ResolvedConfigs {
  if (!settingsPath) {
    throw new SettingsError(
      `no settings: name the settings file with -c ${SETTINGS_CONTEXT_KEY}=<file> or "${SETTINGS_CONTEXT_KEY}" in ` +
        `cdk.json's context ` +
        `(docs/deploying.md, "2. Configure"; ${EXAMPLE_SETTINGS_FILE} shows the format)`,
    );
  }
  const file = readSettingsFile(settingsPath, cwd);
  const problems: string[] = [];
  const skipped: string[] = [];
  const configs: Partial<Record<EnvironmentName, EnvironmentConfig>> = {};
  const named = selection.filter((pattern) => pattern !== '**' && pattern !== '*');
  for (const environment of environmentNames) {
    if (!(environment in file.sections)) {
      if (named.some((pattern) => selects(pattern, stackName(environment))))
        problems.push(...parseEnvironmentSettings(environment, undefined).problems);
      else skipped.push(`${stackName(environment)}: not built, ${settingsPath} has no "${environment}" section`);
      continue;
    }
    const parsed = parseEnvironmentSettings(environment, file.sections[environment]);
    if (!parsed.settings) {
      problems.push(...parsed.problems);
      continue;
    }
    const config = environmentConfig(environment, parsed.settings);
    if (environment === 'production' && !file.isExample) {
      problems.push(
        ...exampleValues(config).map(
          (value) => `production.${value}: an example value; production takes real ones only`,
        ),
      );
    }
    configs[environment] = config;
  }
  if (problems.length) throw new SettingsError(`settings file ${settingsPath}:\n  ${problems.join('\n  ')}`);
  return { configs, skipped };
}

/** The region of an environment as its settings file says (the admin CLI's `--env`), if one is named. */
export function settingsRegion(
  environment: EnvironmentName,
  env: Record<string, string | undefined>,
): string | undefined {
  const path = env[SETTINGS_VARIABLE] || settingsFileOfCdkJson();
  if (!path) return undefined;
  const region = valueAt(readSettingsFile(path).sections[environment], ['region']);
  return typeof region === 'string' ? region : undefined;
}

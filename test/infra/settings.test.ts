import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { Template } from 'aws-cdk-lib/assertions';
import { BUNDLING_STACKS } from 'aws-cdk-lib/cx-api';
import { createServiceApp, FIRST_DEPLOY_CONTEXT_KEY } from '../../lib/app';
import { EXAMPLE_SETTINGS_FILE, exampleValues, resolveConfigs, SettingsError } from '../../lib/settings';
import { repoRoot } from '../../lib/util';

// The operator's settings (lib/settings.ts): one file named by the CDK context, a section per
// environment, no defaults; production refuses what is missing or looks like an example, one line
// per setting, before any construct exists.

const example = JSON.parse(readFileSync(join(repoRoot, EXAMPLE_SETTINGS_FILE), 'utf8')) as Record<
  string,
  Record<string, unknown>
>;
const directory = mkdtempSync(join(tmpdir(), 'svcnum-settings-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

let files = 0;
/** Writes `content` as an operator's own settings file (not the committed example). */
const settingsFile = (content: unknown) => {
  const path = join(directory, `settings-${files++}.json`);
  writeFileSync(path, JSON.stringify(content));
  return path;
};
const problemsOf = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SettingsError);
    return (error as Error).message
      .split('\n')
      .slice(1)
      .map((line) => line.trim());
  }
  throw new Error('no SettingsError');
};

/** Settings with real-looking values (documentation ranges of RFC 5737, .org names). */
const real = {
  account: '333333333333',
  region: 'eu-central-1',
  api: {
    domainName: 'id.svcnum.org',
    certificateArn: 'arn:aws:acm:eu-central-1:333333333333:certificate/8d6c1f7e-7a43-4b7a-9d2e-2f3c4b5a6d7e',
  },
  grpc: {
    domainName: 'grpc.svcnum.org',
    certificateArn: 'arn:aws:acm:eu-central-1:333333333333:certificate/1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d',
    allowedCidrs: ['198.51.100.0/24'],
  },
  alarms: { httpsEndpoints: ['https://events.pagerduty.com/integration/abc/enqueue'] },
  publicReservedConcurrency: 50,
};

describe('settings file', () => {
  it('is required: no file named is one clear line', () => {
    expect(() => resolveConfigs(undefined)).toThrow(/^no settings: name the settings file with -c settings=<file>/);
  });

  it('lists every missing production setting, one line each, with what it is', () => {
    expect(problemsOf(() => resolveConfigs(settingsFile({ sandbox: example.sandbox, production: {} })))).toStrictEqual([
      'production.account: missing: the AWS account id (12 digits)',
      'production.region: missing: the AWS region, e.g. eu-central-1',
      'production.api: missing: the API\'s custom domain: {"domainName", "certificateArn", optional "hostedZone"}',
      'production.grpc: missing: the gRPC endpoint: {"domainName", "certificateArn", "allowedCidrs", optional "hostedZone"}',
      'production.alarms: missing: where alarms go: {"emails": […], "httpsEndpoints": […], "topicArns": […]}, at least one',
      'production.publicReservedConcurrency: missing: reserved concurrency of the public function (docs/deploying.md, "Lambda concurrency")',
    ]);
  });

  it('refuses invalid values, unknown settings and alarms without a destination', () => {
    const problems = problemsOf(() =>
      resolveConfigs(
        settingsFile({
          production: {
            ...real,
            account: '12345',
            grpc: { ...real.grpc, allowedCidrs: ['10.0.0.0/33'] },
            alarms: { emails: [] },
            publicReservedConcurrency: 0,
            extra: 1,
          },
        }),
      ),
    );
    expect(problems).toStrictEqual([
      'production.account: a 12-digit AWS account id',
      'production.grpc.allowedCidrs.0: an IPv4 CIDR such as 203.0.113.0/24',
      'production.alarms: needs at least one destination: emails, httpsEndpoints or topicArns',
      'production.publicReservedConcurrency: at least 1 (and leave the account 100 unreserved)',
      'production: unknown setting "extra"',
    ]);
  });

  it("lets the sandbox go without a reservation (0, for a new account's low quota), never production", () => {
    const sandbox = resolveConfigs(settingsFile({ sandbox: { ...real, publicReservedConcurrency: 0 } })).configs
      .sandbox!;
    expect(sandbox.http.functions.public.reservedConcurrency).toBeUndefined();
    expect(
      resolveConfigs(settingsFile({ sandbox: real })).configs.sandbox!.http.functions.public.reservedConcurrency,
    ).toBe(50);
  });

  it("refuses example values in production from an operator's own file, and names each", () => {
    expect(problemsOf(() => resolveConfigs(settingsFile(example)))).toStrictEqual([
      'production.account (222222222222): an example value; production takes real ones only',
      'production.api.domainName (id.example.com): an example value; production takes real ones only',
      expect.stringMatching(
        /^production\.api\.certificateArn \(arn:aws:acm:.*\/00000000-0000-0000-0000-000000000000\): an example/,
      ),
      'production.grpc.domainName (grpc.example.com): an example value; production takes real ones only',
      expect.stringMatching(/^production\.grpc\.certificateArn /),
      'production.alarms.emails.0 (svcnum-oncall@example.com): an example value; production takes real ones only',
      expect.stringMatching(/^production\.alarms\.httpsEndpoints\.0 /),
      expect.stringMatching(/^production\.alarms\.topicArns\.0 /),
    ]);
  });

  it('takes the committed example as it is where it is named (CI, synth, tests); the sandbox only warns (at synth)', () => {
    const { configs, skipped } = resolveConfigs(EXAMPLE_SETTINGS_FILE, ['**'], repoRoot);
    expect(Object.keys(configs)).toStrictEqual(['sandbox', 'production']);
    expect(skipped).toStrictEqual([]);
    expect(exampleValues(configs.sandbox!)).toContain('api.domainName (id.sandbox.example.com)');
    // An operator's sandbox with example values still builds (the stack warns).
    expect(resolveConfigs(settingsFile({ sandbox: example.sandbox })).configs.sandbox!.account).toBe('111111111111');
  });

  it('builds production from real settings with nothing made up: the values land where the stack reads them', () => {
    const { configs } = resolveConfigs(settingsFile({ production: real }), ['**']);
    const production = configs.production!;
    expect(exampleValues(production)).toStrictEqual([]);
    expect({ account: production.account, region: production.region }).toStrictEqual({
      account: real.account,
      region: real.region,
    });
    expect(production.http.customDomain).toStrictEqual(real.api);
    expect(production.provisioning).toMatchObject(real.grpc);
    expect(production.alarms).toMatchObject({ emails: [], httpsEndpoints: real.alarms.httpsEndpoints, topicArns: [] });
    expect(production.http.functions.public.reservedConcurrency).toBe(50);
  });

  it('does not need production settings to work on the sandbox; a stack selected by name needs its own', () => {
    const sandboxOnly = settingsFile({ sandbox: real });
    const all = resolveConfigs(sandboxOnly, ['**']);
    expect(Object.keys(all.configs)).toStrictEqual(['sandbox']);
    expect(all.skipped).toStrictEqual([`svcnum-production: not built, ${sandboxOnly} has no "production" section`]);
    expect(Object.keys(resolveConfigs(sandboxOnly, ['svcnum-sandbox']).configs)).toStrictEqual(['sandbox']);
    // `cdk deploy --exclusively svcnum-production` (or svcnum-*) names it: every missing setting.
    for (const selection of [['svcnum-production'], ['svcnum-*']]) {
      expect(problemsOf(() => resolveConfigs(sandboxOnly, selection))).toHaveLength(6);
    }
  });
});

describe('a first deploy (-c firstDeploy=true)', () => {
  it("leaves production's deletion and termination protection off, so a failed create rolls back whole and can be retried; the next deploy switches them on", () => {
    const protections = (context: Record<string, string>) => {
      // Templates only: the Lambdas are not bundled (test/infra/support.ts).
      const { app, stacks } = createServiceApp({
        context: { settings: EXAMPLE_SETTINGS_FILE, [BUNDLING_STACKS]: [], ...context },
        nag: false,
        environments: ['production'],
      });
      const template = Template.fromStack(stacks.production).toJSON().Resources as Record<
        string,
        { Type: string; Properties?: Record<string, unknown> }
      >;
      const tables = Object.values(template)
        .filter((resource) => resource.Type === 'AWS::DynamoDB::Table')
        .map((table) => table.Properties!.DeletionProtectionEnabled);
      const nlb = Object.values(template)
        .filter((resource) => resource.Type === 'AWS::ElasticLoadBalancingV2::LoadBalancer')
        .map(
          (lb) =>
            (lb.Properties!.LoadBalancerAttributes as Array<{ Key: string; Value: string }>).find(
              (attribute) => attribute.Key === 'deletion_protection.enabled',
            )?.Value,
        );
      const warnings = app
        .synth()
        .getStackByName('svcnum-production')
        .messages.filter((message) => String(message.entry.data).includes('first deploy'));
      return {
        stack: stacks.production.terminationProtection,
        tables: [...new Set(tables)],
        nlb,
        warned: warnings.length > 0,
      };
    };
    expect(protections({ [FIRST_DEPLOY_CONTEXT_KEY]: 'true' })).toStrictEqual({
      stack: false,
      tables: [false],
      nlb: ['false'],
      warned: true,
    });
    expect(protections({})).toStrictEqual({ stack: true, tables: [true], nlb: ['true'], warned: false });
  }, 240_000);
});

describe('bin/app.ts without production settings', () => {
  it('fails before any resource is built, with one line per missing setting and no stack trace', async () => {
    const outdir = join(directory, 'cdk.out');
    const context = { settings: settingsFile({ production: { ...real, account: undefined, alarms: undefined } }) };
    const result = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/app.ts'], {
      cwd: repoRoot,
      env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify(context), CDK_OUTDIR: outdir },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toStrictEqual([
      `settings file ${context.settings}:`,
      '  production.account: missing: the AWS account id (12 digits)',
      '  production.alarms: missing: where alarms go: {"emails": […], "httpsEndpoints": […], "topicArns": […]}, at least one',
    ]);
    expect(
      existsSync(outdir) ? readdirSync(outdir).filter((file) => file.endsWith('.template.json')) : [],
    ).toStrictEqual([]);
  }, 60_000);
});

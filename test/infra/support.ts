import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll } from 'vitest';
import { BUNDLING_STACKS, type CloudAssembly } from 'aws-cdk-lib/cx-api';
import type { IConstruct } from 'constructs';
import { createServiceApp } from '../../lib/app';
import { environmentNames, type EnvironmentConfig, type EnvironmentName } from '../../lib/config';
import { EXAMPLE_SETTINGS_FILE, resolveConfigs } from '../../lib/settings';
import type { ServiceStack } from '../../lib/service-stack';
import { repoRoot } from '../../lib/util';

// One synthesis of both stacks per test file, with the cdk-nag AwsSolutions plugin on, exactly as
// `cdk synth` runs it. Bundling the Lambdas is the slow part (esbuild, 7 functions per stack): a
// file that reads only the templates skips it (`aws:cdk:bundling-stacks: []`, as `cdk synth
// --exclusively` does for other stacks); the code's asset is then the source folder, everything
// else in the template is the same.

export interface Synthesized {
  assembly: CloudAssembly;
  stacks: Record<EnvironmentName, ServiceStack>;
  templates: Record<EnvironmentName, Template>;
  configs: Record<EnvironmentName, EnvironmentConfig>;
  /** Removes the cloud assembly (about 10 MB of bundles and the image context). */
  cleanup(): void;
}

/** The configuration of both environments from the committed example settings (deploy/settings.example.json). */
export const testConfigs = () =>
  resolveConfigs(EXAMPLE_SETTINGS_FILE, ['**'], repoRoot).configs as Record<EnvironmentName, EnvironmentConfig>;

export interface SynthesisOptions {
  /** Whether the Lambdas are bundled (true unless the file reads only templates). */
  bundle?: boolean;
}

export function synthesize(
  configs: Record<EnvironmentName, EnvironmentConfig> = testConfigs(),
  environments: readonly EnvironmentName[] = environmentNames,
  { bundle = true }: SynthesisOptions = {},
): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), 'svcnum-cdk-'));
  const context = bundle ? {} : { [BUNDLING_STACKS]: [] };
  const { app, stacks } = createServiceApp({ outdir, configs, environments, context });
  const assembly = app.synth();
  const template = (stack: ServiceStack) =>
    Template.fromJSON(
      JSON.parse(readFileSync(assembly.getStackArtifact(stack.artifactId).templateFullPath, 'utf8')) as Record<
        string,
        unknown
      >,
    );
  return {
    assembly,
    stacks,
    configs,
    templates: Object.fromEntries(environments.map((name) => [name, template(stacks[name])])) as Record<
      EnvironmentName,
      Template
    >,
    cleanup: () => rmSync(outdir, { recursive: true, force: true }),
  };
}

/**
 * Both stacks of the example settings, synthesized once before a test file's suites and removed
 * after them: what the file reads through the returned object's properties.
 */
export function synthesizeForFile(options: SynthesisOptions = {}): Synthesized {
  let synthesized: Synthesized | undefined;
  beforeAll(() => {
    synthesized = synthesize(undefined, undefined, options);
  }, 180_000);
  afterAll(() => synthesized?.cleanup());
  const current = () => {
    if (!synthesized) throw new Error('not synthesized yet: read it inside a test or a hook');
    return synthesized;
  };
  return {
    get assembly() {
      return current().assembly;
    },
    get stacks() {
      return current().stacks;
    },
    get templates() {
      return current().templates;
    },
    get configs() {
      return current().configs;
    },
    cleanup: () => current().cleanup(),
  };
}

/** The logical id of a construct's CloudFormation resource. */
export function logicalId(construct: IConstruct): string {
  const element = (construct.node.defaultChild ?? construct) as CfnElement;
  return element.stack.getLogicalId(element);
}

export type Json = Record<string, unknown>;
export interface Resource {
  Type: string;
  Properties?: Json;
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
}

export const resources = (template: Template, type: string) => template.findResources(type) as Record<string, Resource>;

export interface Statement {
  Effect: string;
  Action?: string | string[];
  NotAction?: unknown;
  Resource?: unknown;
  NotResource?: unknown;
  Principal?: unknown;
}

export const list = <T>(value: T | T[] | undefined): T[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/** Every IAM statement of the template: policies, inline role policies, managed policies. */
export function iamStatements(template: Template): Array<{ where: string; roles: string[]; statement: Statement }> {
  const found: Array<{ where: string; roles: string[]; statement: Statement }> = [];
  const push = (where: string, roles: string[], document: unknown) => {
    for (const statement of list((document as { Statement?: Statement | Statement[] } | undefined)?.Statement))
      found.push({ where, roles, statement });
  };
  for (const [id, policy] of Object.entries(resources(template, 'AWS::IAM::Policy'))) {
    const roles = list(policy.Properties?.Roles as Array<{ Ref: string }> | undefined).map((role) => role.Ref);
    push(id, roles, policy.Properties?.PolicyDocument);
  }
  for (const [id, policy] of Object.entries(resources(template, 'AWS::IAM::ManagedPolicy')))
    push(id, [], policy.Properties?.PolicyDocument);
  for (const [id, role] of Object.entries(resources(template, 'AWS::IAM::Role'))) {
    for (const inline of list(role.Properties?.Policies as Array<{ PolicyDocument: unknown }> | undefined))
      push(id, [id], inline.PolicyDocument);
  }
  return found;
}

/**
 * A readable name for a policy resource: `table:<key>`, `index:<key>/<name>`, `key:<logicalId>`,
 * `log:<logicalId>`, `*`, or the JSON of anything else.
 */
export function resourceName(resource: unknown, names: Map<string, string>): string {
  if (resource === '*') return '*';
  const getAtt = (value: unknown) => (value as { 'Fn::GetAtt'?: [string, string] } | null)?.['Fn::GetAtt'];
  const direct = getAtt(resource);
  if (direct && direct[1] === 'Arn') return names.get(direct[0]) ?? `arn:${direct[0]}`;
  const join = (resource as { 'Fn::Join'?: [string, unknown[]] } | null)?.['Fn::Join'];
  if (join && join[0] === '' && join[1].length === 2 && typeof join[1][1] === 'string') {
    const base = getAtt(join[1][0]);
    const index = /^\/index\/([A-Za-z0-9_.-]+)$/.exec(join[1][1]);
    if (base && index) return `index:${(names.get(base[0]) ?? base[0]).replace(/^table:/, '')}/${index[1]}`;
  }
  return JSON.stringify(resource);
}

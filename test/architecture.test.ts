import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  functionLengths,
  importCycles,
  importGraph,
  longLines,
  resolveRelative,
  root,
  sourceFiles,
  specifiersOf,
} from '../scripts/code-shape';
import { currentMap, MAP_DOC, moduleMap } from '../scripts/module-map';

// The shape of the code, checked from its syntax (scripts/code-shape.ts, the TypeScript parser):
// - core/: domain modules (a folder each) that import only the shared kernel, a kernel that imports
//   no domain, and no domain that reads the environment (configuration is read once per process by
//   core/adapters/runtime-config.ts and handed in). The composition root (core/registry.ts,
//   core/store.ts, core/tables.ts) and the adapters may import anything;
// - no import cycle in core/, lambdas/, grpc-service/, lib/, local/ (types and re-exports included);
// - the module map in docs/architecture.md is the one the code gives (npm run docs:map);
// - functions in core/ of at most 80 lines; lines of at most 120 characters in the source folders
//   (test names may run longer: the formatter keeps them whole).

const DOMAINS = ['oauth', 'accounts', 'provisioning', 'messaging', 'directory'];
const coreFiles = sourceFiles(['core']);

/** The part of core/ a file belongs to: a domain, `kernel`, `adapters`, or `composition` (the root files). */
function partOf(file: string): string {
  const [, first, second] = file.split('/');
  return second === undefined ? 'composition' : first!;
}

function domainViolations(): string[] {
  const violations: string[] = [];
  for (const file of coreFiles) {
    const from = partOf(file);
    const targets = specifiersOf(file)
      .map((specifier) => resolveRelative(file, specifier))
      .filter((target): target is string => target?.startsWith('core/') === true);
    for (const target of targets) {
      const to = partOf(target);
      if (DOMAINS.includes(from) && to !== from && to !== 'kernel') {
        violations.push(`${file} (${from}) imports ${target} (${to}): a domain imports only the kernel`);
      }
      if (from === 'kernel' && to !== 'kernel') violations.push(`${file} (kernel) imports ${target} (${to})`);
    }
    if (DOMAINS.includes(from) && /\bprocess\.env\b/.test(readFileSync(join(root, file), 'utf8'))) {
      violations.push(`${file} (${from}) reads process.env`);
    }
  }
  return violations;
}

describe('core/ architecture', () => {
  it('no domain imports another domain (types included), the kernel imports no domain, no domain reads the env', () => {
    expect(domainViolations()).toEqual([]);
  });

  it('the check sees imports at all (it is not vacuous): type-only imports and re-exports too', () => {
    const graph = importGraph(coreFiles);
    expect(graph.get('core/registry.ts')).toContain('core/oauth/index.ts');
    // `import type { Logger } from './log'` only.
    expect(graph.get('core/adapters/valkey-wakeups-subscriber.ts')).toContain('core/adapters/log.ts');
    // `export { … } from './valkey-wakeups-publisher'`, besides an import.
    const publisher = specifiersOf('core/adapters/valkey-wakeups.ts').filter((s) => s === './valkey-wakeups-publisher');
    expect(publisher).toHaveLength(2);
  });
});

describe('import cycles', () => {
  const folders = ['core', 'lambdas', 'grpc-service', 'lib', 'local'];

  it(`no file in ${folders.join('/, ')}/ imports one that imports it back (types included)`, () => {
    const files = sourceFiles(folders);
    expect(files.length).toBeGreaterThan(100);
    expect(importCycles(importGraph(files)), 'import cycles (a → b → a): break each one').toEqual([]);
  });

  it('the cycle check names a cycle when there is one (it is not vacuous)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts', 'd.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', []],
      ['e.ts', ['e.ts']],
    ]);
    expect(importCycles(graph)).toEqual(['a.ts → b.ts → c.ts → a.ts', 'e.ts → e.ts']);
  });
});

describe('the module map (docs/architecture.md)', () => {
  it('is the one the code gives', () => {
    const doc = readFileSync(join(root, MAP_DOC), 'utf8');
    expect(currentMap(doc), `the module map in ${MAP_DOC} is not current: run npm run docs:map`).toBe(moduleMap());
  });
});

const LINE_FOLDERS = ['core', 'lambdas', 'grpc-service', 'lib', 'local', 'bench', 'bin', 'scripts'];

describe('code shape', () => {
  it('no function in core/ over 80 lines (a factory of methods counts as one)', () => {
    const over = coreFiles
      .flatMap(functionLengths)
      .filter(({ lines }) => lines > 80)
      .map(({ key, lines }) => `${key}: ${lines}`);
    expect(over, 'functions over 80 lines (file:function: lines): split them').toEqual([]);
  });

  it(`no line over 120 characters in ${LINE_FOLDERS.join(', ')} (generated code aside)`, () => {
    const over = sourceFiles(LINE_FOLDERS, /\.(ts|mts|cts|js|mjs|cjs)$/)
      .map((file) => [file, longLines(file, 120).count] as const)
      .filter(([, count]) => count > 0)
      .map(([file, count]) => `${file}: ${count}`);
    expect(over, 'files with lines over 120 characters (file: how many): wrap them').toEqual([]);
  });

  it('the measures measure (they are not vacuous)', () => {
    expect(functionLengths('core/adapters/runtime-config.ts').map(({ key }) => key)).toContain(
      'core/adapters/runtime-config.ts:readRuntimeConfig',
    );
    expect(functionLengths('core/adapters/valkey-wakeups-subscriber.ts').map(({ key }) => key)).toContain(
      'core/adapters/valkey-wakeups-subscriber.ts:EngineSubscriber.want',
    );
    expect(longLines('core/oauth/authorization.ts', 0).count).toBeGreaterThan(100);
  });
});

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { allModules } from '../core/registry';

// The shape of core/: domain modules (a folder each) that import only the shared kernel, a kernel
// that imports no domain, and no domain that reads the environment (configuration is read once per
// process by core/adapters/runtime-config.ts and handed in). The composition root (core/registry.ts,
// core/store.ts) and the adapters may import anything. The module map (who imports whom) is printed.

const root = fileURLToPath(new URL('..', import.meta.url));
const DOMAINS = ['oauth', 'accounts', 'provisioning', 'messaging', 'directory'] as const;

function files(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(root, path)).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** The part of core/ a file belongs to: a domain, `kernel`, `adapters`, or `composition` (registry, store union, tables). */
function partOf(file: string): string {
  const [, first, second] = file.split('/');
  if (second !== undefined) return first!;
  return 'composition';
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(SPECIFIER)].map((match) => normalize(join(dirname(file), match[1]!)))
    .filter((target) => target.startsWith('core/'))
    .map((target) => {
      for (const candidate of [`${target}.ts`, join(target, 'index.ts'), target]) {
        try {
          if (statSync(join(root, candidate)).isFile()) return candidate;
        } catch { /* next */ }
      }
      return target;
    });
}

const coreFiles = files('core');
const edges = new Map<string, Set<string>>();
const violations: string[] = [];
for (const file of coreFiles) {
  const from = partOf(file);
  for (const target of importsOf(file)) {
    const to = partOf(target);
    if (to !== from) (edges.get(from) ?? edges.set(from, new Set()).get(from)!).add(to);
    const domainFrom = (DOMAINS as readonly string[]).includes(from);
    const domainTo = (DOMAINS as readonly string[]).includes(to);
    if (domainFrom && domainTo && from !== to) violations.push(`${file} (${from}) imports ${target} (${to})`);
    if (domainFrom && !domainTo && to !== 'kernel') violations.push(`${file} (${from}) imports ${target} (${to}): a domain imports only the kernel`);
    if (from === 'kernel' && to !== 'kernel') violations.push(`${file} (kernel) imports ${target} (${to})`);
  }
  if ((DOMAINS as readonly string[]).includes(from) && /\bprocess\.env\b/.test(readFileSync(join(root, file), 'utf8'))) {
    violations.push(`${file} (${from}) reads process.env`);
  }
}

describe('core/ architecture', () => {
  it('prints the module map: each part of core/ and what it imports', () => {
    const order = ['kernel', ...DOMAINS, 'composition', 'adapters'];
    const lines = order.filter((part) => coreFiles.some((file) => partOf(file) === part)).map((part) =>
      `${part.padEnd(12)} (${String(coreFiles.filter((file) => partOf(file) === part).length).padStart(2)} files) → ${[...(edges.get(part) ?? [])].sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(', ') || '(nothing)'}`);
    // What the registry injects into each module (capabilities, never imports).
    const wiring = allModules.map(({ name, needs }) => `${name.padEnd(12)} ← ${Object.keys(needs).join(', ') || '(nothing)'}`);
    console.log(`core/ module map (imports)\n${lines.join('\n')}\n\nregistry wiring (core/registry.ts: module ← what it is given)\n${wiring.join('\n')}`);
    expect(lines.length).toBeGreaterThan(0);
  });

  it('no domain imports another domain (types included), the kernel imports no domain, no domain reads process.env', () => {
    expect(violations).toEqual([]);
  });

  it('the check sees imports at all (it is not vacuous)', () => {
    expect(importsOf('core/registry.ts').map((target) => relative('core', target))).toContain(join('oauth', 'index.ts'));
  });
});

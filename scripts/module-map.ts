import { readFileSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { packageOf, resolveRelative, root, sourceFiles, specifiersOf, syntaxOf } from './code-shape';

// The module map of core/ in docs/architecture.md, generated from the code: per folder its files,
// what its index.ts exports, which other folders of core/ it imports and which packages. `npm run
// docs:map` writes it between the markers; test/architecture.test.ts fails while it is not current.

export const MAP_DOC = 'docs/architecture.md';
export const MAP_START = '<!-- module-map:start -->';
export const MAP_END = '<!-- module-map:end -->';
const WIDTH = 100;
const LABEL = 18;

/** The folder of core/ a file belongs to (a sub-folder belongs to its parent): `core` for the root files. */
const folderOf = (file: string) => (file.split('/').length > 2 ? file.split('/')[1]! : 'core');

/** A folder as the map names it among what another imports. */
const shown = (folder: string) => (folder === 'core' ? 'core/*.ts' : `${folder}/`);

/** What an index.ts exports: its names, and `* from x` for a re-exported module. */
function exportsOf(file: string): string[] {
  const names: string[] = [];
  const exported = (node: ts.Node) =>
    ts.canHaveModifiers(node) &&
    ts.getModifiers(node)?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword);
  for (const statement of syntaxOf(file).statements) {
    if (ts.isExportDeclaration(statement)) {
      const from =
        statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier)
          ? posix.basename(statement.moduleSpecifier.text)
          : '';
      const clause = statement.exportClause;
      if (clause && ts.isNamedExports(clause)) names.push(...clause.elements.map((element) => element.name.text));
      else names.push(`* from ${from}`);
    } else if (exported(statement) && ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) names.push(declaration.name.getText());
    } else if (exported(statement) && 'name' in statement && statement.name) {
      names.push((statement.name as ts.Identifier).text);
    }
  }
  return names;
}

/** `label` then the items, comma-separated, wrapped at WIDTH under the first item. */
function field(label: string, items: readonly string[]): string[] {
  const lines: string[] = [];
  let line = label.padEnd(LABEL);
  if (items.length === 0) return [`${label.padEnd(LABEL)}(nothing)`];
  items.forEach((item, index) => {
    const text = index < items.length - 1 ? `${item},` : item;
    if (line.length > LABEL && line.length + 1 + text.length > WIDTH) {
      lines.push(line.trimEnd());
      line = ' '.repeat(LABEL);
    }
    line += line.length > LABEL ? ` ${text}` : text;
  });
  lines.push(line.trimEnd());
  return lines;
}

/** The map of core/: one paragraph per folder, in the order a newcomer reads them. */
export function moduleMap(): string {
  const files = sourceFiles(['core']);
  // The kernel, then the domain modules (a folder with an index.ts), then the others, the composition root last.
  const folders = [...new Set(files.map(folderOf))].filter((folder) => folder !== 'core' && folder !== 'kernel').sort();
  const isModule = (folder: string) => files.includes(`core/${folder}/index.ts`);
  const order = ['kernel', ...folders.filter(isModule), ...folders.filter((folder) => !isModule(folder)), 'core'];
  const paragraphs = order.map((folder) => {
    const own = files.filter((file) => folderOf(file) === folder);
    const base = folder === 'core' ? 'core' : `core/${folder}`;
    const imported = new Set<string>();
    const packages = new Set<string>();
    for (const file of own) {
      for (const specifier of specifiersOf(file)) {
        const target = resolveRelative(file, specifier);
        if (target?.startsWith('core/') && folderOf(target) !== folder) imported.add(folderOf(target));
        else if (!specifier.startsWith('.') && !specifier.startsWith('node:')) packages.add(packageOf(specifier));
      }
    }
    const index = own.find((file) => file === `${base}/index.ts`);
    return [
      `${base}/: ${own.length} files`,
      ...field('  files', own.map((file) => posix.relative(base, file).replace(/\.ts$/, '')).sort()),
      ...(index ? field('  index exports', exportsOf(index)) : []),
      ...field('  imports', order.filter((name) => imported.has(name)).map(shown)),
      ...(packages.size > 0 ? field('  packages', [...packages].sort()) : []),
    ].join('\n');
  });
  return [
    MAP_START,
    '<!-- generated from the code by `npm run docs:map` (scripts/module-map.ts); ' +
      'test/architecture.test.ts checks it is current -->',
    '',
    '```text',
    paragraphs.join('\n\n'),
    '```',
    MAP_END,
  ].join('\n');
}

/** `doc` with its marked block replaced by `map`; an Error when the markers are missing. */
export function withMap(doc: string, map: string): string {
  const start = doc.indexOf(MAP_START);
  const end = doc.indexOf(MAP_END);
  if (start < 0 || end < start) throw new Error(`${MAP_DOC} has no ${MAP_START} … ${MAP_END} block`);
  return doc.slice(0, start) + map + doc.slice(end + MAP_END.length);
}

/** The block as it stands in the doc (markers included), or undefined. */
export function currentMap(doc: string): string | undefined {
  const start = doc.indexOf(MAP_START);
  const end = doc.indexOf(MAP_END);
  return start < 0 || end < start ? undefined : doc.slice(start, end + MAP_END.length);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = join(root, MAP_DOC);
  writeFileSync(path, withMap(readFileSync(path, 'utf8'), moduleMap()));
  console.log(`${MAP_DOC}: module map written`);
}

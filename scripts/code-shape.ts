import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// What test/architecture.test.ts and scripts/module-map.ts read from the code: the source files,
// who imports whom (static imports, `import type`, `export … from`, `import('…')` types: what the
// TypeScript compiler parses, resolved like the bundler does), import cycles, the length of every
// function and of every line. Parsed with the TypeScript compiler's parser (no type checking).

export const root = fileURLToPath(new URL('..', import.meta.url));

/** Generated or installed, never written by hand. */
const SKIPPED_FOLDERS = new Set(['node_modules', 'gen', 'dist', 'cdk.out', '.data', 'results']);

/** Files under `folders` (repository-relative, `/`-separated, sorted) whose names match `pattern`. */
export function sourceFiles(folders: readonly string[], pattern = /\.ts$/): string[] {
  const walk = (folder: string): string[] =>
    readdirSync(join(root, folder)).flatMap((name) => {
      const path = posix.join(folder, name);
      if (statSync(join(root, path)).isDirectory()) return SKIPPED_FOLDERS.has(name) ? [] : walk(path);
      return pattern.test(name) ? [path] : [];
    });
  return folders
    .filter((folder) => existsSync(join(root, folder)))
    .flatMap(walk)
    .sort();
}

const parsed = new Map<string, ts.SourceFile>();

/** The syntax tree of a repository file (kept: the test and the map read the same files). */
export function syntaxOf(file: string): ts.SourceFile {
  let tree = parsed.get(file);
  if (!tree) {
    tree = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.ES2022, true);
    parsed.set(file, tree);
  }
  return tree;
}

/** Every module specifier the file names statically: imports (types too), re-exports, `import('…')` types. */
export function specifiersOf(file: string): string[] {
  const specifiers: string[] = [];
  const visit = (node: ts.Node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      specifiers.push(node.moduleReference.expression.text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      specifiers.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(syntaxOf(file));
  return specifiers;
}

/** A relative specifier of `file` as a repository file (`x` → x.ts, x/index.ts; x.js → x.ts), if one exists. */
export function resolveRelative(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const target = posix.normalize(posix.join(posix.dirname(file), specifier));
  const candidates = [target, `${target}.ts`, posix.join(target, 'index.ts'), target.replace(/\.(m?)js$/, '.$1ts')];
  return candidates.find((candidate) => existsSync(join(root, candidate)) && statSync(join(root, candidate)).isFile());
}

/** The package a bare specifier names (`@scope/name` or `name`), `node:` built-ins included. */
export const packageOf = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;

/** Who imports whom among `files`: each file's resolved relative imports that are among them. */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  return new Map(
    files.map((file) => [
      file,
      [
        ...new Set(
          specifiersOf(file)
            .map((specifier) => resolveRelative(file, specifier))
            .filter((target): target is string => target !== undefined && known.has(target)),
        ),
      ].sort(),
    ]),
  );
}

/** The strongly connected components of more than one file, or of a file importing itself (Tarjan). */
function tangles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (node: string) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.includes(node)) found.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) connect(node);
  return found;
}

/** One cycle through the first file of a tangle: the shortest way from it back to it (breadth first). */
function cycleThrough(graph: ReadonlyMap<string, readonly string[]>, component: readonly string[]): string[] {
  const start = component[0]!;
  const inside = new Set(component);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (next === start) {
        const path = [node];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start];
      }
      if (inside.has(next) && !cameFrom.has(next)) {
        cameFrom.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

/** Every import cycle, one line each: `a.ts → b.ts → a.ts` (and how many files are tangled with it). */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  return tangles(graph).map((component) => {
    const cycle = cycleThrough(graph, component).join(' → ');
    return component.length > cycle.split(' → ').length - 1 ? `${cycle} (${component.length} files tangled)` : cycle;
  });
}

const FUNCTION_KINDS = new Set([
  ts.SyntaxKind.FunctionDeclaration,
  ts.SyntaxKind.FunctionExpression,
  ts.SyntaxKind.ArrowFunction,
  ts.SyntaxKind.MethodDeclaration,
  ts.SyntaxKind.Constructor,
  ts.SyntaxKind.GetAccessor,
  ts.SyntaxKind.SetAccessor,
]);

/** What a function-like node is called: its own name, the variable or property it is given to, or its call. */
function nameOf(node: ts.Node): string {
  const named = node as ts.Node & { name?: ts.Node };
  const own = named.name;
  if (own && (ts.isIdentifier(own) || ts.isStringLiteral(own) || ts.isPrivateIdentifier(own))) return own.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (
    (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) &&
    ts.isIdentifier(parent.name)
  ) {
    return parent.name.text;
  }
  if (ts.isCallExpression(parent)) return `${parent.expression.getText().slice(0, 40)}(…)`;
  return '<anonymous>';
}

export interface FunctionLength {
  /** `path:outer.inner` (a second of the same name in the file: `#2`). */
  key: string;
  lines: number;
}

/** Every function-like node with a body in `file`, with its length in lines (first to last, both counted). */
export function functionLengths(file: string): FunctionLength[] {
  const tree = syntaxOf(file);
  const found: FunctionLength[] = [];
  const seen = new Map<string, number>();
  const visit = (node: ts.Node, outer: string) => {
    let inside = outer;
    if (FUNCTION_KINDS.has(node.kind) && (node as ts.FunctionLikeDeclaration).body) {
      inside = outer ? `${outer}.${nameOf(node)}` : nameOf(node);
      const count = (seen.get(inside) ?? 0) + 1;
      seen.set(inside, count);
      const first = tree.getLineAndCharacterOfPosition(node.getStart(tree)).line;
      const last = tree.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ key: `${file}:${inside}${count > 1 ? `#${count}` : ''}`, lines: last - first + 1 });
    } else if (ts.isClassDeclaration(node) && node.name) {
      inside = outer ? `${outer}.${node.name.text}` : node.name.text;
    }
    ts.forEachChild(node, (child) => visit(child, inside));
  };
  visit(tree, '');
  return found;
}

/** The lines of `file` longer than `limit` characters: how many, and the longest. */
export function longLines(file: string, limit: number): { count: number; longest: number } {
  const lengths = readFileSync(join(root, file), 'utf8')
    .split('\n')
    .map((line) => line.length)
    .filter((length) => length > limit);
  return { count: lengths.length, longest: Math.max(0, ...lengths) };
}

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// The README and docs/*.md link to each other, to headings and to source files. A page that is
// renamed, a heading reworded or a file moved must not leave a dead link behind: every relative
// link and anchor here points at an existing file and, for an anchor, an existing heading.

const pages = [
  'README.md',
  ...readdirSync('docs')
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name)),
];

/** Lines outside fenced code blocks (where `#` starts a shell comment, not a heading). */
function prose(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (line.startsWith('```')) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/**
 * GitHub's heading anchor: the rendered text, lower case, punctuation dropped, spaces to dashes; repeats get -1, -2, …
 */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of prose(markdown)) {
    const heading = /^#{1,6} (.+)$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '');
    const slug = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

/** Relative link targets of a page: `[text](target)`, outside code blocks and inline code. */
function links(markdown: string): string[] {
  const targets: string[] = [];
  for (const line of prose(markdown)) {
    for (const match of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) targets.push(target);
    }
  }
  return targets;
}

describe('documentation links', () => {
  it.each(pages)('every relative link and anchor in %s resolves', (page) => {
    const broken: string[] = [];
    for (const target of links(readFileSync(page, 'utf8'))) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? page : join(dirname(page), decodeURIComponent(path));
      if (!existsSync(file)) {
        broken.push(`${target}: no file ${file}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!file.endsWith('.md') || statSync(file).isDirectory())
        broken.push(`${target}: an anchor into something that is not a page`);
      else if (!anchors(readFileSync(file, 'utf8')).has(anchor))
        broken.push(`${target}: ${file} has no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });

  it('every page in docs/ is linked from the README', () => {
    const linked = new Set(
      links(readFileSync('README.md', 'utf8')).map((target) => relative('.', target.split('#')[0]!)),
    );
    expect(pages.filter((page) => page !== 'README.md' && !linked.has(page))).toEqual([]);
  });

  it('finds the anchors and links it checks', () => {
    // The checker itself: a dead link must not pass because nothing was parsed.
    expect(
      anchors(
        '# A `code` title\n## Sending: `POST /api/messages`\n```sh\n# not a heading\n```\n## Sending: `POST /api/messages`',
      ),
    ).toEqual(new Set(['a-code-title', 'sending-post-apimessages', 'sending-post-apimessages-1']));
    expect(
      links('[a](docs/x.md#y) `[b](no.md)` [c](https://example.com) <http://localhost:3000>\n```\n[d](no.md)\n```'),
    ).toEqual(['docs/x.md#y']);
    expect(pages.length).toBeGreaterThan(10);
  });
});

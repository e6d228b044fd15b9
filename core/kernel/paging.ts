import { DomainError } from './errors';
import type { PageTokenCodec } from './page-token';

/** Where a page of a list continues (DynamoDB's LastEvaluatedKey, opaque to callers). */
export type PageKey = Record<string, unknown>;
export interface Page<T> {
  items: T[];
  nextKey?: PageKey;
}

/** AIP-158 page sizes of the gRPC lists. */
export const pageLimits = { pageSizeDefault: 50, pageSizeMax: 100 } as const;

// AIP-158 pagination: page_size (default 50, at most 100) and an opaque page_token that is only
// valid for the list, the filter and the caller it was issued to (core/kernel/page-token.ts).

export function pageSize(requested: number | undefined): number {
  if (requested === undefined || requested === 0) return pageLimits.pageSizeDefault;
  if (!Number.isInteger(requested) || requested < 0) {
    throw new DomainError('invalid_argument', 'page_size must be a positive integer');
  }
  return Math.min(requested, pageLimits.pageSizeMax);
}

/** One list's pages: its name, the filter of this listing, and how an item's key is built. */
export interface PagedList<T> {
  /** The list's fixed name: its page tokens are valid for it only. */
  readonly name: string;
  /**
   * The filter that shapes this listing ('' or absent for none): a token continues only a listing
   * with the same one.
   */
  readonly filter?: string;
  /** The key to continue after `item` (what DynamoDB returns as LastEvaluatedKey for the list's query). */
  keyOf(item: T): PageKey;
}

/**
 * One page of a list. One item more than the page holds is read, so that a page that ends the
 * list carries no next_page_token (DynamoDB returns a key whenever the limit is reached, which
 * would cost the caller an extra, empty page).
 */
export async function listPage<T, R>(
  pageTokens: PageTokenCodec,
  input: { pageSize?: number; pageToken?: string },
  ownerId: string,
  list: PagedList<T>,
  query: (limit: number, startKey: PageKey | undefined) => Promise<Page<T>>,
  map: (item: T) => R,
): Promise<{ items: R[]; nextPageToken: string }> {
  const size = pageSize(input.pageSize);
  const binding = { list: list.name, filter: list.filter ?? '', caller: ownerId };
  const page = await query(size + 1, await pageTokens.open<PageKey>(binding, input.pageToken));
  const items = page.items.slice(0, size);
  // The next key is always built by the list itself from the last item shown.
  const more = page.items.length > size || (page.nextKey !== undefined && items.length > 0);
  return {
    items: items.map(map),
    nextPageToken: more ? await pageTokens.seal(binding, list.keyOf(items[items.length - 1]!)) : '',
  };
}

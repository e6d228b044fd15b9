import { DomainError } from '../kernel/errors';
import { provisioningLimits } from './config';
import type { Page, PageKey } from './store';

// AIP-158 pagination: page_size (default 50, at most 100) and an opaque page_token that is only
// valid for the caller it was issued to (and, for lists that describe their keys, only for the
// list that issued it).

export function pageSize(requested: number | undefined): number {
  if (requested === undefined || requested === 0) return provisioningLimits.pageSizeDefault;
  if (!Number.isInteger(requested) || requested < 0) throw new DomainError('invalid_argument', 'page_size must be a positive integer');
  return Math.min(requested, provisioningLimits.pageSizeMax);
}

/** The page keys of one list: how an item's key is built, and which decoded keys the list accepts. */
export interface PagedList<T> {
  /** The key to continue after `item` (what DynamoDB returns as LastEvaluatedKey for the list's query). */
  keyOf(item: T): PageKey;
  /** Whether a decoded key is one this list could have issued (shape and values). */
  accepts(key: PageKey): boolean;
}

/** A key with exactly these attributes, each a string. */
export function hasStringAttributes(key: PageKey, names: readonly string[]): boolean {
  const present = Object.keys(key);
  return present.length === names.length && names.every((name) => typeof key[name] === 'string');
}

export function decodePageToken(token: string | undefined, ownerId: string, list?: Pick<PagedList<unknown>, 'accepts'>): PageKey | undefined {
  if (!token) return undefined;
  try {
    const key = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as PageKey;
    // A key of another list (or a forged one) would make the store query fail: refused here.
    if (key && typeof key === 'object' && !Array.isArray(key) && key.ownerId === ownerId && (!list || list.accepts(key))) return key;
  } catch {
    // falls through to the error below
  }
  throw new DomainError('invalid_argument', 'page_token is not valid for this call; start again without it');
}

export function pageOf<T, R>(page: Page<T>, map: (item: T) => R): { items: R[]; nextPageToken: string } {
  return {
    items: page.items.map(map),
    nextPageToken: page.nextKey ? Buffer.from(JSON.stringify(page.nextKey), 'utf8').toString('base64url') : '',
  };
}

/**
 * One page of a list. One item more than the page holds is read, so that a page that ends the
 * list carries no next_page_token (DynamoDB returns a key whenever the limit is reached, which
 * would cost the caller an extra, empty page).
 */
export async function listPage<T, R>(
  input: { pageSize?: number; pageToken?: string },
  ownerId: string,
  list: PagedList<T>,
  query: (limit: number, startKey: PageKey | undefined) => Promise<Page<T>>,
  map: (item: T) => R,
): Promise<{ items: R[]; nextPageToken: string }> {
  const size = pageSize(input.pageSize);
  const page = await query(size + 1, decodePageToken(input.pageToken, ownerId, list));
  const items = page.items.slice(0, size);
  // The next token is always built by the list itself, so it is one the list accepts back.
  const more = page.items.length > size || (page.nextKey !== undefined && items.length > 0);
  return pageOf({ items, ...(more ? { nextKey: list.keyOf(items[items.length - 1]!) } : {}) }, map);
}

import { ProvisioningError } from './errors';
import { provisioningLimits } from './config';
import type { Page, PageKey } from './store';

// AIP-158 pagination: page_size (default 50, at most 100) and an opaque page_token that is only
// valid for the caller it was issued to.

export function pageSize(requested: number | undefined): number {
  if (requested === undefined || requested === 0) return provisioningLimits.pageSizeDefault;
  if (!Number.isInteger(requested) || requested < 0) throw new ProvisioningError('invalid_argument', 'page_size must be a positive integer');
  return Math.min(requested, provisioningLimits.pageSizeMax);
}

export function decodePageToken(token: string | undefined, ownerId: string): PageKey | undefined {
  if (!token) return undefined;
  try {
    const key = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as PageKey;
    if (key && typeof key === 'object' && key.ownerId === ownerId) return key;
  } catch {
    // falls through to the error below
  }
  throw new ProvisioningError('invalid_argument', 'page_token is not valid for this call; start again without it');
}

export function pageOf<T, R>(page: Page<T>, map: (item: T) => R): { items: R[]; nextPageToken: string } {
  return {
    items: page.items.map(map),
    nextPageToken: page.nextKey ? Buffer.from(JSON.stringify(page.nextKey), 'utf8').toString('base64url') : '',
  };
}

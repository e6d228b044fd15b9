import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto';
import { derivedKey } from './derived-key';
import type { Clock, MacKey } from './ports';
import { invalidArgument } from './errors';

// Page tokens and resume cursors: where a listing continues, handed to the client and back. The
// position inside is a DynamoDB key (or the stream's per-inbox positions), so a token the client
// made up must never reach the store. Every token is authenticated (HMAC-SHA-256) and bound to
// the list that issued it, the filter that shaped that listing and the caller it was issued to;
// anything else is refused as invalid_argument.
//
// Layout: base64url(position JSON ‖ tag), no padding; tag = HMAC(key, binding JSON ‖ position
// JSON). The binding is not carried: the verifier knows it, and a JSON array of strings is
// prefix-free, so no other binding and position concatenate to the same input. The position is
// readable, not secret: it only holds ids the caller may see.
//
// The key is derived once per process from the page-token key (a KMS HMAC key of its own in AWS,
// PAGE_TOKEN_KEY_ID; DATA_DIR/keys/page-token.key locally) as MAC("svcnum page-token key v1"), so
// every process of an environment agrees without holding key material; then each token costs a
// local HMAC. It is not the sign-in MAC key: the units that derive it (public, the gRPC task) must
// not be able to mint sign-in tokens or device cookies. A change of a list's key shape renames the
// list (e.g. `numbers.2`), so tokens of the old shape are refused instead of reaching the store.

const KEY_LABEL = 'svcnum page-token key v1';
const TAG_BYTES = 32;

/** What a token is valid for; a token sealed under one binding opens under that binding only. */
export interface PageTokenBinding {
  /** The list that issued it: a fixed name per list (`numbers`, `masks`, `agents`, `messages`, `discover`). */
  readonly list: string;
  /** The filter that shaped the listing (ListAgents' kind, discover's capability); '' for none. */
  readonly filter?: string;
  /** The caller it was issued to (the owner account's svcnum_id); '' for a public list. */
  readonly caller: string;
}

export interface PageTokenCodec {
  /** A token for `position` (a JSON value) under `binding`. */
  seal(binding: PageTokenBinding, position: unknown): Promise<string>;
  /**
   * The position of a token sealed under `binding`; undefined for no token (the first page).
   * Anything else (forged, altered, truncated, of another list, filter or caller) is
   * invalid_argument naming `field`.
   */
  open<T>(binding: PageTokenBinding, token: string | undefined, field?: string): Promise<T | undefined>;
}

export function createPageTokenCodec(pageTokenKey: MacKey, clock: Clock = { now: () => Date.now() }): PageTokenCodec {
  // Lazy and single flight: one MAC-key call (a KMS GenerateMac in AWS) per process (./derived-key.ts).
  const key = derivedKey(pageTokenKey, KEY_LABEL, clock, 'page tokens');
  const tag = (secret: KeyObject, binding: PageTokenBinding, position: Buffer) =>
    createHmac('sha256', secret)
      .update(JSON.stringify([binding.list, binding.filter ?? '', binding.caller]))
      .update(position)
      .digest();

  return {
    async seal(binding, position) {
      const body = Buffer.from(JSON.stringify(position), 'utf8');
      return Buffer.concat([body, tag(await key(), binding, body)]).toString('base64url');
    },

    async open<T>(binding: PageTokenBinding, token: string | undefined, field = 'page_token'): Promise<T | undefined> {
      if (!token) return undefined;
      const bytes = Buffer.from(token, 'base64url');
      // Only the canonical spelling: Node's decoder skips foreign characters and loose trailing bits.
      if (bytes.length > TAG_BYTES && bytes.toString('base64url') === token) {
        const body = bytes.subarray(0, bytes.length - TAG_BYTES);
        if (timingSafeEqual(tag(await key(), binding, body), bytes.subarray(bytes.length - TAG_BYTES))) {
          return JSON.parse(body.toString('utf8')) as T;
        }
      }
      throw invalidArgument(`${field} is not valid for this call; start again without it`);
    },
  };
}

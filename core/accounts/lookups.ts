import type { User } from '../kernel/model';
import type { AccountLookupsPort } from './store';

export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/** A svcnum_id no account has (ULIDs never have time 0 and random 0): the stand-in read of `findUser`. */
const NO_ACCOUNT = '0'.repeat(26);

/**
 * The account a person signs in with: by number, email or svcnum_id. Always the same number
 * of reads for a number or an email, found or not (a read of a key no account has stands in
 * for the second), so that the sign-in page's work does not tell which accounts exist.
 */
export async function findUser(store: AccountLookupsPort, identifier: string): Promise<User | undefined> {
  const trimmed = identifier.trim();
  if (/^\d{11,}$/.test(trimmed)) {
    // Only a number's current holder: not a mask, not the previous holder of a rotated number.
    const holder = (await store.getNumber(trimmed))?.svcnumId;
    const user = await store.getUser(holder ?? NO_ACCOUNT);
    return holder && user?.svcnum === trimmed ? user : undefined;
  }
  if (trimmed.includes('@')) {
    const svcnumId = await store.findSvcnumIdByEmail(normaliseEmail(trimmed));
    const user = await store.getUser(svcnumId ?? NO_ACCOUNT);
    return svcnumId ? user : undefined;
  }
  return store.getUser(trimmed);
}

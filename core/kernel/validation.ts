import { ULID_PATTERN } from './ids';
import { invalidArgument } from './errors';

// Checks of inputs that more than one module takes (provisioning, directory), with messages that
// say what to send instead.

/** How many capabilities an agent may offer. */
export const CAPABILITIES_MAX = 20;

export function svcnumIdField(value: string | undefined, field: string): string {
  if (!value) throw invalidArgument(`${field} is required`);
  if (!ULID_PATTERN.test(value)) throw invalidArgument(`${field} must be a svcnum_id (a 26-character ULID)`);
  return value;
}

const CAPABILITY = /^[a-z0-9][a-z0-9_.:-]{0,63}$/;

export function capabilitiesField(values: readonly string[] | undefined): string[] {
  const list = [...new Set(values ?? [])];
  if (list.length > CAPABILITIES_MAX) throw invalidArgument(`at most ${CAPABILITIES_MAX} capabilities`);
  const bad = list.find((capability) => !CAPABILITY.test(capability));
  if (bad !== undefined) {
    throw invalidArgument('each capability is 1-64 characters of [a-z0-9_.:-], starting with a letter or digit');
  }
  return list;
}

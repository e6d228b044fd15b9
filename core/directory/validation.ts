import { invalidArgument } from '../kernel/errors';
import { directoryLimits } from './config';

// Inputs of the directory: aliases and formatted numbers.

/** Before lower-casing: ASCII only, so that no Unicode case mapping (K → k, the Kelvin sign) can forge a name. */
const ALIAS_INPUT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const HAS_LETTER = /[a-z]/;

/**
 * Names kept for the service itself: nobody but an operator may register them, so that no one
 * can pose as the service. Compared after normalisation.
 */
export const RESERVED_ALIASES: ReadonlySet<string> = new Set([
  'admin',
  'administrator',
  'root',
  'support',
  'help',
  'helpdesk',
  'security',
  'abuse',
  'system',
  'staff',
  'official',
  'operator',
  'moderator',
  'info',
  'billing',
  'postmaster',
  'webmaster',
  'hostmaster',
  'noreply',
  'no-reply',
  'api',
  'www',
  'mail',
  'svcnum',
  'service',
  'null',
  'undefined',
]);

/** The normalised alias, or INVALID_ARGUMENT saying what an alias must be. */
export function aliasField(value: string | undefined, options: { allowReserved?: boolean } = {}): string {
  const raw = value ?? '';
  if (raw === '') throw invalidArgument('alias is required');
  const { aliasMin: min, aliasMax: max } = directoryLimits;
  if (raw.length < min || raw.length > max || !ALIAS_INPUT.test(raw)) {
    throw invalidArgument(
      `an alias is ${min} to ${max} characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit`,
    );
  }
  const alias = raw.toLowerCase();
  if (!HAS_LETTER.test(alias)) {
    throw invalidArgument('an alias must contain at least one letter (so that it never looks like a number)');
  }
  if (!options.allowReserved && RESERVED_ALIASES.has(alias)) throw invalidArgument(`the alias ${alias} is reserved`);
  return alias;
}

/** What a formatted number may contain besides digits: spaces, dashes, dots, parentheses, one leading +. */
const FORMATTED_NUMBER = /^\+?[0-9 ().-]+$/;
const SERVICE_NUMBER = /^[0-9]{11,15}$/;

/**
 * A formatted number (`+1 (555) 010-0000`, `1.555.010.0000`) as the digits of a service number.
 * `undefined` when `value` is not number-like (it has a letter, say: then it is an alias);
 * INVALID_ARGUMENT when it is number-like but does not have 11 to 15 digits.
 */
export function formattedNumber(value: string): string | undefined {
  if (/[A-Za-z]/.test(value) || !FORMATTED_NUMBER.test(value.trim())) return undefined;
  const digits = value.replace(/[^0-9]/g, '');
  if (!SERVICE_NUMBER.test(digits)) {
    throw invalidArgument(
      'a number has 11 to 15 digits (spaces, dashes, dots, parentheses and a leading + are ignored)',
    );
  }
  return digits;
}

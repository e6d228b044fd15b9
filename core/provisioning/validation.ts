import { agentScopes, parseScope } from '../kernel/scopes';
import { provisioningLimits } from './config';
import { invalidArgument } from '../kernel/errors';

// Checks of provisioning inputs, with messages that say what to send instead (shared ones: core/kernel/validation.ts).

export { capabilitiesField, svcnumIdField } from '../kernel/validation';

export function displayNameField(value: string | undefined, required: boolean): string | undefined {
  const trimmed = value?.trim() ?? '';
  if (!trimmed) {
    if (required) throw invalidArgument('display_name is required');
    return undefined;
  }
  if ([...trimmed].length > provisioningLimits.displayNameMax) {
    throw invalidArgument(`display_name is longer than ${provisioningLimits.displayNameMax} characters`);
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) throw invalidArgument('display_name must not contain control characters');
  return trimmed;
}

/** The scopes an agent may hold: a subset of the agent catalog, all of it by default. */
export function agentScopeField(value: string | undefined): string[] {
  if (!value?.trim()) return [...agentScopes];
  const scopes = parseScope(value);
  if (!scopes) throw invalidArgument('scope must be a space-separated list');
  const refused = scopes.filter((scope) => !(agentScopes as readonly string[]).includes(scope));
  if (refused.length > 0) throw invalidArgument(`an agent may hold only: ${agentScopes.join(' ')}`);
  return scopes;
}

const MASK_SCOPE = /^[a-z][a-z0-9_.-]{0,63}$/;

export function maskScopeField(value: string | undefined): string {
  if (!value || !MASK_SCOPE.test(value)) {
    throw invalidArgument('scope is required: 1-64 characters of [a-z0-9_.-], starting with a letter');
  }
  return value;
}

import type { AccountStatus, ClientLookup, TokenStanding } from '../kernel/capabilities';
import { serveGrant, type ServedGrant } from '../kernel/grant-type';
import type { Clock, MacKey, Random } from '../kernel/ports';
import { createGrantTable, oauthGrants } from './grants/table';
import type { OAuthPort } from './store';
import { oauthError } from '../kernel/errors';
import type { ProofCheck, ProofRefusal } from './dpop';
import { valuesOf } from './bearer';
import { createDpopNonces, type DpopNonces } from './dpop-nonces';
import { createTokenService, type TokenRequestKey } from './token-service';
import type { TokenIssuer } from './tokens';

/**
 * The token endpoint (POST /oauth/token, /oauth/revoke) as the registry builds it: OAuth's own
 * grant types (./grants/table.ts `oauthGrants`), then `added`, those the modules it needs add
 * through their definitions' `grants` (core/registry.ts), in the order discovery lists them. With
 * `dpopNonces`, its DPoP proofs carry a server nonce (./dpop-nonces.ts), and `nonceHeaders` says it.
 */
export function createTokenEndpointModule(
  ports: { store: OAuthPort; clock: Clock; random: Random; pageTokenKey: MacKey; dpopNonces?: boolean },
  needs: {
    oauth: { issuer: TokenIssuer };
    accounts: ClientLookup & AccountStatus & TokenStanding;
    dpop: { checkProof: ProofCheck };
  },
  added: readonly ServedGrant[],
) {
  const { store, clock, random } = ports;
  const deps = { store, clock, random, issuer: needs.oauth.issuer, accounts: needs.accounts };
  const grants = createGrantTable([...oauthGrants.map((grant) => serveGrant(grant, deps)), ...added]);
  const { getClientRechecked } = needs.accounts;
  const nonces = createDpopNonces(ports.dpopNonces ?? false, ports.pageTokenKey, clock);
  const requestKey = tokenRequestKey(needs.dpop.checkProof, nonces);
  return {
    ...createTokenService({ store, clock, grants, getClientRechecked, requestKey }),
    /** What a token answer carries when nonces are on: the nonce the next proof should use (RFC 9449 §8.2). */
    async nonceHeaders(): Promise<Record<string, string>> {
      const nonce = await nonces.current();
      return nonce === undefined ? {} : { 'DPoP-Nonce': nonce };
    },
  };
}

/** The token endpoint's refusal of a proof: 400 JSON (RFC 9449 §5.1), a nonce in DPoP-Nonce. */
const tokenEndpointRefusal: ProofRefusal = (code, message, dpopNonce) =>
  oauthError(code, message, dpopNonce !== undefined ? { dpopNonce } : {});

/** The thumbprint of a token request's valid proof; undefined without a DPoP header; else the refusal. */
function tokenRequestKey(checkProof: ProofCheck, nonces: DpopNonces): TokenRequestKey {
  return async (presented) => {
    const proofs = valuesOf(presented?.dpop);
    if (proofs.length === 0) return undefined;
    if (proofs.length > 1 || typeof proofs[0] !== 'string') {
      throw tokenEndpointRefusal('invalid_dpop_proof', 'send at most one DPoP header');
    }
    return checkProof(proofs[0], presented!.target, undefined, tokenEndpointRefusal, nonces);
  };
}

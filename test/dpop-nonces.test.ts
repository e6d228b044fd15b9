import * as oauth from 'oauth4webapi';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../core/kernel/model';
import { dpopKey } from './support/dpop';
import { postForm } from './support/flow';
import { startTestService, type TestService } from './support/service';

// DPoP server nonces (RFC 9449 §8) with DPOP_NONCES on: a token request whose proof has no nonce
// gets 400 use_dpop_nonce and the nonce in DPoP-Nonce; openid-client 6 retries with it by itself,
// oauth4webapi 3 after isDPoPNonceError, as their documentation says; every token answer carries
// the current nonce. Resource servers take proofs without one (docs/security.md#dpop-proofs).

let service: TestService;
let api: { client: Client; clientSecret: string };

beforeAll(async () => {
  service = await startTestService({ dpopNonces: true });
  api = (await service.core.registration.createApiClient({ name: 'Nonce partner', scope: 'messaging' })) as typeof api;
});
afterAll(() => service?.close());

const tokenUrl = () => `${service.issuer}/oauth/token`;
const basic = () => `Basic ${Buffer.from(`${api.client.clientId}:${api.clientSecret}`).toString('base64')}`;

describe('DPoP nonces at the token endpoint', () => {
  it('asks for a nonce, then takes the proof that carries it and hands out the current one', async () => {
    const key = await dpopKey();
    const form = { grant_type: 'client_credentials' };
    const asked = await postForm(tokenUrl(), form, {
      Authorization: basic(),
      DPoP: await key.proof('POST', tokenUrl()),
    });
    expect(asked.status).toBe(400);
    expect(asked.json).toMatchObject({ error: 'use_dpop_nonce' });
    const nonce = asked.headers.get('dpop-nonce')!;
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const served = await postForm(tokenUrl(), form, {
      Authorization: basic(),
      DPoP: await key.proof('POST', tokenUrl(), { nonce }),
    });
    expect(served.json.token_type).toBe('DPoP');
    expect(served.headers.get('dpop-nonce')).toBe(nonce);
    // UserInfo and the messages API ask for no nonce: the bound token and a plain proof are enough.
    const token = String(served.json.access_token);
    const url = `${service.issuer}/api/messages`;
    const sent = await fetch(url, {
      method: 'POST',
      headers: {
        Authorization: `DPoP ${token}`,
        DPoP: await key.proof('POST', url, { accessToken: token }),
        'Content-Type': 'application/json',
      },
      body: '{"to":"x","text":"hi"}',
    });
    expect(sent.status).not.toBe(401);
  });

  it('openid-client 6 completes a round on its own', async () => {
    const config = await oidc.discovery(
      new URL(service.issuer),
      api.client.clientId,
      undefined,
      oidc.ClientSecretBasic(api.clientSecret),
      { execute: [oidc.allowInsecureRequests] },
    );
    const DPoP = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256'));
    const tokens = await oidc.clientCredentialsGrant(config, { scope: 'messaging' }, { DPoP });
    expect(tokens.token_type.toLowerCase()).toBe('dpop');
  });

  it('oauth4webapi 3 completes a round after isDPoPNonceError', async () => {
    const insecure = { [oauth.allowInsecureRequests]: true };
    const issuer = new URL(service.issuer);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const client: oauth.Client = { client_id: api.client.clientId };
    const DPoP = oauth.DPoP(client, await oauth.generateKeyPair('EdDSA'));
    const grant = async () =>
      oauth.processClientCredentialsResponse(
        as,
        client,
        await oauth.clientCredentialsGrantRequest(
          as,
          client,
          oauth.ClientSecretBasic(api.clientSecret),
          {},
          {
            ...insecure,
            DPoP,
          },
        ),
      );
    let retried = false;
    const tokens = await grant().catch((error: unknown) => {
      if (!oauth.isDPoPNonceError(error)) throw error;
      retried = true;
      return grant();
    });
    expect(retried).toBe(true);
    expect(tokens.token_type.toLowerCase()).toBe('dpop');
  });
});

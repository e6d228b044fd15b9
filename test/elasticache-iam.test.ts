import { Sha256Js } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import {
  createIamTokens,
  elasticacheIamToken,
  IAM_TOKEN_EXPIRES_SECONDS,
  type AwsCredentials,
} from '../core/adapters/elasticache-iam';

// core/adapters/elasticache-iam.ts: the IAM auth token an ElastiCache user of authentication type
// `iam` signs in with. Its form is AWS's ("Authenticating with IAM": a SigV4 presigned
// `GET http://<replicationGroupId>/?Action=connect&User=<userId>`, service elasticache, 900 s,
// without `http://`), and its signature is checked against an independent SigV4 computation: the
// AWS SDK's own signer (@smithy/signature-v4, in the dev tree only) with a pure-JavaScript SHA-256
// (Sha256Js), so neither node:crypto nor our canonicalisation takes part in the check.

const auth = { replicationGroupId: 'svcnum-sandbox-wakeups', userId: 'svcnum-wakeups-sandbox', region: 'eu-central-1' };
// AWS's documentation example keys; a session token with the characters that need encoding (/ + =).
const credentials: AwsCredentials = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjE/w+session==',
};
const signedAt = new Date('2025-03-04T05:06:07.890Z');

/** What the SDK's signer makes of the same request: the query it would send, signature included. */
async function sdkPresigned(creds: AwsCredentials, at: Date): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 'elasticache', region: auth.region, credentials: creds, sha256: Sha256Js });
  const presigned = await signer.presign(
    {
      method: 'GET',
      protocol: 'http:',
      hostname: auth.replicationGroupId,
      path: '/',
      query: { Action: 'connect', User: auth.userId },
      headers: { host: auth.replicationGroupId },
    },
    { signingDate: at, expiresIn: IAM_TOKEN_EXPIRES_SECONDS },
  );
  return presigned.query as Record<string, string>;
}

/** A token's host, path and query (decoded), in the order given. */
function parse(token: string) {
  expect(token).not.toMatch(/^https?:/);
  const url = new URL(`http://${token}`);
  return { host: url.host, path: url.pathname, rawQuery: url.search.slice(1), query: [...url.searchParams.entries()] };
}

describe('the ElastiCache IAM auth token', () => {
  it('is the presigned connect request of the user to the replication group, without http://: Action, User, SigV4 query parameters, 900 s', () => {
    const token = elasticacheIamToken(auth, credentials, signedAt);
    const { host, path, query, rawQuery } = parse(token);
    expect(host).toBe('svcnum-sandbox-wakeups');
    expect(path).toBe('/');
    expect(
      token.startsWith(
        'svcnum-sandbox-wakeups/?Action=connect&User=svcnum-wakeups-sandbox&X-Amz-Algorithm=AWS4-HMAC-SHA256&',
      ),
    ).toBe(true);
    expect(Object.fromEntries(query)).toStrictEqual({
      Action: 'connect',
      User: 'svcnum-wakeups-sandbox',
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': 'AKIAIOSFODNN7EXAMPLE/20250304/eu-central-1/elasticache/aws4_request',
      'X-Amz-Date': '20250304T050607Z',
      'X-Amz-Expires': '900',
      'X-Amz-Security-Token': credentials.sessionToken,
      'X-Amz-SignedHeaders': 'host',
      'X-Amz-Signature': expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // Percent-encoded as SigV4 wants (the session token's / + =), each parameter once.
    expect(rawQuery).toContain('X-Amz-Security-Token=IQoJb3JpZ2luX2VjE%2Fw%2Bsession%3D%3D');
    expect(rawQuery).toContain(
      'X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20250304%2Feu-central-1%2Felasticache%2Faws4_request',
    );
    expect(new Set(query.map(([name]) => name)).size).toBe(query.length);
  });

  it("carries the signature the AWS SDK's signer computes for that request, with and without a session token", async () => {
    for (const creds of [
      credentials,
      { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey },
    ]) {
      for (const at of [signedAt, new Date('2031-12-31T23:59:59.000Z')]) {
        const ours = Object.fromEntries(parse(elasticacheIamToken(auth, creds, at)).query);
        expect(ours).toStrictEqual(await sdkPresigned(creds, at));
      }
    }
  });

  it('changes with the signing time, the user, the group, the region and the secret (each is signed)', () => {
    const signature = (token: string) => new URL(`http://${token}`).searchParams.get('X-Amz-Signature');
    const base = signature(elasticacheIamToken(auth, credentials, signedAt));
    const variants = [
      elasticacheIamToken(auth, credentials, new Date(signedAt.getTime() + 1000)),
      elasticacheIamToken({ ...auth, userId: 'svcnum-wakeups-production' }, credentials, signedAt),
      elasticacheIamToken({ ...auth, replicationGroupId: 'svcnum-production-wakeups' }, credentials, signedAt),
      elasticacheIamToken({ ...auth, region: 'eu-west-1' }, credentials, signedAt),
      elasticacheIamToken(auth, { ...credentials, secretAccessKey: `${credentials.secretAccessKey}x` }, signedAt),
    ];
    expect(new Set([base, ...variants.map(signature)]).size).toBe(1 + variants.length);
  });

  it('is signed at each read from credentials fetched ahead, and fetched again once they near their expiry', async () => {
    let now = signedAt.getTime();
    let fetches = 0;
    const tokens = createIamTokens(
      auth,
      () => {
        fetches++;
        // Temporary credentials good for one hour from the fetch.
        return Promise.resolve({
          ...credentials,
          accessKeyId: `AKIA${fetches}`,
          expiration: new Date(now + 3_600_000),
        });
      },
      () => new Date(now),
    );
    try {
      // Before any credentials: an empty password (refused by the engine), and they are fetched.
      expect(tokens.token()).toBe('');
      await tokens.ready();
      expect(fetches).toBe(1);
      const first = tokens.token();
      expect(first).toBe(elasticacheIamToken(auth, { ...credentials, accessKeyId: 'AKIA1' }, signedAt));
      now += 5 * 60_000;
      expect(parse(tokens.token()).query).toContainEqual(['X-Amz-Date', '20250304T051107Z']);
      await tokens.ready();
      expect(fetches).toBe(1);
      // Ten minutes on: fetched again (the SDK's provider answers from its cache while they are good).
      now += 5 * 60_000;
      await tokens.ready();
      expect(fetches).toBe(2);
      expect(parse(tokens.token()).query).toContainEqual([
        'X-Amz-Credential',
        'AKIA2/20250304/eu-central-1/elasticache/aws4_request',
      ]);
    } finally {
      tokens.close();
    }
  });
});

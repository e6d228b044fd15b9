import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListAgentsRequest } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
import { callTarget } from '../grpc-service/calls';
import { bufCurl } from './support/buf';
import { dpopKey, type DpopKey } from './support/dpop';
import { postForm } from './support/flow';
import { provisioningApp, type ProvisioningApp } from './support/grpc';
import { startTestService, type TestService } from './support/service';

// DPoP (RFC 9449) on the gRPC API: a provisioning client's DPoP-bound token is accepted with
// `authorization: DPoP <token>` and one `dpop` metadata entry holding a proof for htm POST and htu
// http://<:authority>/<package.Service>/<Method> (docs/grpc-api.md), by grpc-js and by `buf curl` through
// reflection alone; refused (UNAUTHENTICATED)
// without the proof, with a replayed one, one for another method, or under the Bearer scheme.

const METHOD = '/svcnum.provisioning.v1alpha1.AgentService/ListAgents';

let service: TestService;
let app: ProvisioningApp;
let key: DpopKey;
let token: string;
/** The authority the generated clients send (their target address). */
let authority: string;

beforeAll(async () => {
  service = await startTestService();
  app = await provisioningApp(service);
  key = await dpopKey('EdDSA');
  const tokenUrl = `${service.issuer}/oauth/token`;
  const reply = await postForm(
    tokenUrl,
    { grant_type: 'client_credentials', client_id: app.clientId, client_secret: app.clientSecret },
    { DPoP: await key.proof('POST', tokenUrl) },
  );
  expect(reply.json.token_type).toBe('DPoP');
  token = String(reply.json.access_token);
  authority = `127.0.0.1:${service.grpcPort}`;
});
afterAll(async () => {
  app?.close();
  await service?.close();
});

/** ListAgents with these metadata entries; the response or the ServiceError. */
function listAgents(entries: Record<string, string>): Promise<unknown> {
  const metadata = new Metadata();
  for (const [name, value] of Object.entries(entries)) metadata.set(name, value);
  return new Promise((resolve) => {
    app.agents.listAgents(ListAgentsRequest.fromPartial({}), metadata, (error: ServiceError | null, response) =>
      resolve(error ?? response),
    );
  });
}

const proofFor = (method = METHOD, options: Parameters<DpopKey['proof']>[2] = {}) =>
  key.proof('POST', `http://${authority}${method}`, { accessToken: token, ...options });

describe('gRPC with DPoP-bound tokens', () => {
  it('admits a call with the DPoP scheme and a proof in the dpop metadata', async () => {
    const answer = await listAgents({ authorization: `DPoP ${token}`, dpop: await proofFor() });
    expect(answer).toHaveProperty('agents');
  });

  it('serves `buf curl` through reflection alone with the DPoP scheme and a proof in the dpop header', async () => {
    const call = async (headers: string[]) =>
      bufCurl([...headers.flatMap((header) => ['-H', header]), '-d', '{}', `http://${authority}${METHOD}`]);
    const served = await call([`authorization: DPoP ${token}`, `dpop: ${await proofFor()}`]);
    expect(served).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(served.stdout)).toBeTypeOf('object');
    const refused = await call([`authorization: DPoP ${token}`]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/"code": "unauthenticated"[\s\S]*"message": "invalid_dpop_proof: /);
  });

  it('refuses the call without a proof, with a replayed one, and with one for another method', async () => {
    const replayed = await proofFor();
    await listAgents({ authorization: `DPoP ${token}`, dpop: replayed });
    const otherMethod = await proofFor('/svcnum.provisioning.v1alpha1.AgentService/GetAgent');
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ authorization: `DPoP ${token}` }, /^invalid_dpop_proof: send one DPoP proof header/],
      [{ authorization: `DPoP ${token}`, dpop: replayed }, /^invalid_dpop_proof: .*used before/],
      [{ authorization: `DPoP ${token}`, dpop: otherMethod }, /^invalid_dpop_proof: .*htu must be http:\/\/127/],
      [{ authorization: `DPoP ${token}`, dpop: 'garbage' }, /^invalid_dpop_proof: /],
    ];
    for (const [entries, message] of cases) {
      const refused = (await listAgents(entries)) as ServiceError;
      expect({ code: status[refused.code], details: refused.details }).toMatchObject({
        code: 'UNAUTHENTICATED',
        details: message,
      });
    }
  });

  it('refuses the bound token under the Bearer scheme, even with a proof', async () => {
    const refused = (await listAgents({ authorization: `Bearer ${token}`, dpop: await proofFor() })) as ServiceError;
    expect(status[refused.code]).toBe('UNAUTHENTICATED');
    expect(refused.details).toMatch(/^invalid_token: the token is DPoP-bound/);
  });

  it("builds the htu from GRPC_ORIGIN and the path, whatever the call's :authority says; without it (npm start), from the :authority", () => {
    const call = { getPath: () => METHOD, getHost: () => 'elsewhere.example' };
    const deployed = { issuer: 'https://id.example', grpcOrigin: 'https://grpc.example' };
    expect(callTarget(deployed, call)).toEqual({ method: 'POST', url: `https://grpc.example${METHOD}` });
    const local = { getPath: () => METHOD, getHost: () => 'grpc.example:443' };
    expect(callTarget({ issuer: 'https://id.example' }, local).url).toBe(`https://grpc.example:443${METHOD}`);
    expect(callTarget({ issuer: 'http://localhost:3000' }, local).url).toBe(`http://grpc.example:443${METHOD}`);
  });

  it('still admits the same client with an unbound Bearer token', async () => {
    expect(await listAgents({ authorization: `Bearer ${app.token}` })).toHaveProperty('agents');
  });
});

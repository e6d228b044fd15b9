import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Metadata, Server, ServerCredentials, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NumberState } from '../grpc-service/gen/svcnum/provisioning/v1alpha1/common';
import {
  MaskServiceClient,
  MaskServiceService,
  type Mask,
  type MaskServiceServer,
} from '../grpc-service/gen/svcnum/provisioning/v1alpha1/mask_service';

// The provisioning API's interface definition (proto/) and its generated grpc-js code
// (grpc-service/gen/, produced by `npm run gen` before the tests run).

const root = fileURLToPath(new URL('..', import.meta.url));

describe('provisioning proto', () => {
  it('passes buf lint (STANDARD + COMMENTS, see buf.yaml)', () => {
    const buf = fileURLToPath(new URL('../node_modules/.bin/buf', import.meta.url));
    const result = spawnSync(buf, ['lint'], { cwd: root, encoding: 'utf8' });
    expect(result.error).toBeUndefined();
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});

describe('generated MaskService over grpc-js', () => {
  const createTime = new Date('2030-01-02T03:04:05.678Z');
  const expireTime = new Date('2030-01-02T04:04:05.678Z');
  const fixedMask: Mask = {
    maskId: '01JD0000000000000000000000',
    svcnum: '50000000001',
    participantA: '01JD00000000000000000000AA',
    participantB: '01JD00000000000000000000BB',
    scope: 'delivery.order-1234',
    state: NumberState.NUMBER_STATE_ACTIVE,
    createTime,
    expireTime,
  };

  let server: Server;
  let client: MaskServiceClient;
  let receivedId: string | undefined;

  beforeAll(async () => {
    server = new Server();
    // Only GetMask is implemented: grpc-js answers the others with UNIMPLEMENTED.
    const implementation: Pick<MaskServiceServer, 'getMask'> = {
      getMask(call, callback) {
        receivedId = call.request.maskId;
        callback(null, fixedMask);
      },
    };
    server.addService(MaskServiceService, implementation);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    client = new MaskServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await new Promise<void>((resolve) => (server ? server.tryShutdown(() => resolve()) : resolve()));
  });

  it('round-trips GetMask with a Timestamp and an enum', async () => {
    const metadata = new Metadata();
    metadata.set('authorization', 'Bearer test-token');
    const mask = await new Promise<Mask>((resolve, reject) =>
      client.getMask({ maskId: fixedMask.maskId }, metadata, (error, response) =>
        error ? reject(error) : resolve(response),
      ),
    );
    expect(receivedId).toBe(fixedMask.maskId);
    expect(mask).toEqual(fixedMask);
    expect(mask.createTime).toBeInstanceOf(Date);
    expect(mask.createTime?.toISOString()).toBe('2030-01-02T03:04:05.678Z');
    expect(mask.expireTime?.getTime()).toBe(expireTime.getTime());
    expect(mask.state).toBe(NumberState.NUMBER_STATE_ACTIVE);
  });

  it('answers an RPC the server does not implement with UNIMPLEMENTED', async () => {
    const error = await new Promise<ServiceError>((resolve, reject) =>
      client.closeMask({ maskId: fixedMask.maskId }, (err) =>
        err ? resolve(err) : reject(new Error('CloseMask unexpectedly succeeded')),
      ),
    );
    expect(error.code).toBe(status.UNIMPLEMENTED);
  });
});

// The gRPC provisioning service in a child process that kills itself with SIGKILL at a chosen
// point of one request (test/provisioning-crash.test.ts). Like a Fargate task of the service, it
// keeps nothing itself: DynamoDB (the test's embedded one, DYNAMO_ENDPOINT) outlives the crash,
// and a restarted process carries on with the same data. Run (bundled by esbuild, as the image
// is) with DYNAMO_ENDPOINT, DATA_DIR (its signing keys), ISSUER and LEASE_MS, and optionally
// CRASH = {"requestId", "method", "nth"}: the process dies right after the `nth` store call of
// `method` that concerns that request (its request record, or anything under the resource id the
// record names), once the call returned. Without CRASH it dies only when killed from outside.
// Prints one JSON line {"grpcPort"} once listening.

import type { IdempotencyRecord } from '../../core/kernel/model';
import { defaultProvisioningConfig } from '../../core/provisioning/config';
import type { Store } from '../../core/store';
import { startGrpcServer } from '../../grpc-service/server';
import { need, processCore } from './process-core';

interface CrashPoint {
  requestId: string;
  method: keyof Store;
  nth: number;
}

const crash = process.env.CRASH ? (JSON.parse(process.env.CRASH) as CrashPoint) : undefined;
/** What identifies the target request in a store call's arguments: its request key, then its resource id. */
const marks: string[] = [];
let seen = 0;

function concernsTarget(method: string, args: unknown[]): boolean {
  if (method === 'beginRequest' && marks.length === 0) {
    const record = args[0] as IdempotencyRecord;
    if (!record.requestKey.endsWith(`#${crash!.requestId}`)) return false;
    marks.push(record.requestKey, record.resourceId!);
    return true;
  }
  if (marks.length === 0) return false;
  const text = JSON.stringify(args);
  return marks.some((mark) => text.includes(mark));
}

function wrapStore(store: Store): Store {
  if (!crash) return store;
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return async (...args: unknown[]) => {
        const result = await Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
        // Every call is looked at (the target's beginRequest names its resource id); only calls of the chosen method
        // count.
        const concerned = concernsTarget(property, args);
        if (concerned && property === crash.method && ++seen === crash.nth) process.kill(process.pid, 'SIGKILL');
        return result;
      };
    },
  });
}

const { modules } = await processCore({
  wrapStore,
  provisioning: { ...defaultProvisioningConfig, lease: Number(need('LEASE_MS')) },
});
const grpc = await startGrpcServer(modules, { port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ grpcPort: grpc.port })}\n`);
// The parent going away (its stdin pipe closing) ends this process too.
process.stdin.on('end', () => process.kill(process.pid, 'SIGKILL'));
process.stdin.resume();

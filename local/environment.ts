// Environment of the local runner and admin CLI (design brief §5).
//   PORT           HTTP port (default 3000)
//   GRPC_PORT      gRPC port (default 50051)
//   DYNAMODB_PORT  embedded DynamoDB port (default 8000)
//   DATA_DIR       data folder (default .data)
//   ISSUER         issuer URL (default http://localhost:$PORT)
//   HOST           address the HTTP and gRPC servers listen on (default 127.0.0.1; the embedded
//                  DynamoDB has no authentication and always listens on 127.0.0.1 only)

import { LocalStartError } from './start-errors';

function port(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) {
    throw new LocalStartError(`${name} must be a port number (0-65535), got '${value}'`);
  }
  return parsed;
}

export function localEnvironment() {
  const issuer = process.env.ISSUER?.trim() || undefined;
  if (issuer !== undefined && !/^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(issuer)) {
    throw new LocalStartError(`ISSUER must be an http(s) URL without query or fragment, got '${issuer}'`);
  }
  const host = process.env.HOST?.trim() || '127.0.0.1';
  return {
    host,
    port: port('PORT', 3000),
    grpcPort: port('GRPC_PORT', 50051),
    dynamoPort: port('DYNAMODB_PORT', 8000),
    dataDir: process.env.DATA_DIR?.trim() || '.data',
    issuer,
  };
}

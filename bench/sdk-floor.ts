import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient, SignCommand } from '@aws-sdk/client-kms';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';

// The peer of the Lambda bundle benchmark: a Lambda entry holding only the AWS SDK clients every
// route group but discovery carries (DynamoDB through lib-dynamodb, KMS), bundled as the stack
// bundles ours. Its cold load is the floor a group's load is compared with in the same run.

export const handler = async () => {
  const db = DynamoDBDocumentClient.from(new DynamoDBClient({}));
  const kms = new KMSClient({});
  return Promise.all([
    db.send(new GetCommand({ TableName: 'floor', Key: { id: 'floor' } })),
    kms.send(new SignCommand({ KeyId: 'floor', Message: new Uint8Array(1), SigningAlgorithm: 'ED25519_SHA_512' })),
  ]);
};

// The custom resource behind lib/public-keys.ts, inlined into the template (CommonJS, the
// nodejs22.x runtime's own AWS SDK): on create and update, KMS GetPublicKey once for each signing
// key, answered to CloudFormation as one attribute, PublicKeys: a JSON object of key ARN → base64
// DER SubjectPublicKeyInfo (KMS_PUBLIC_KEYS). Delete has nothing to undo. Any failure fails the
// deploy step with its reason, so a deploy never publishes a partial or wrong key set.
const { GetPublicKeyCommand, KMSClient } = require('@aws-sdk/client-kms');

const kms = new KMSClient({});

async function publicKeys(keyIds) {
  const keys = {};
  for (const keyId of keyIds) {
    const response = await kms.send(new GetPublicKeyCommand({ KeyId: keyId }));
    // Ed25519 keys sign every token, RSA 2048 keys the RS256 ID tokens.
    const spec = response.KeySpec === 'ECC_NIST_EDWARDS25519' || response.KeySpec === 'RSA_2048';
    if (!spec || response.KeyUsage !== 'SIGN_VERIFY' || !response.PublicKey) {
      throw new Error(
        `KMS key ${keyId} is ${response.KeySpec}/${response.KeyUsage}; expected ECC_NIST_EDWARDS25519 or RSA_2048, ` +
          'SIGN_VERIFY',
      );
    }
    keys[keyId] = Buffer.from(response.PublicKey).toString('base64');
  }
  return JSON.stringify(keys);
}

exports.handler = async (event) => {
  const answer = {
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    PhysicalResourceId: event.PhysicalResourceId || 'signing-public-keys',
  };
  try {
    const data =
      event.RequestType === 'Delete' ? undefined : { PublicKeys: await publicKeys(event.ResourceProperties.KeyIds) };
    Object.assign(answer, { Status: 'SUCCESS', ...(data ? { Data: data } : {}) });
  } catch (error) {
    Object.assign(answer, { Status: 'FAILED', Reason: String(error?.message).slice(0, 500) });
  }
  // The pre-signed S3 URL of this request: CloudFormation waits for this PUT.
  const response = await fetch(event.ResponseURL, {
    method: 'PUT',
    headers: { 'content-type': '' },
    body: JSON.stringify(answer),
  });
  if (!response.ok) throw new Error(`CloudFormation response refused: HTTP ${response.status}`);
};

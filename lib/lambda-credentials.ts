// Stands in for @aws-sdk/credential-provider-node in the Lambda bundles (lib/bundling.ts `alias`).
// Lambda hands a function its role's credentials in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, the first source the default chain tries; the rest of that chain (SSO, ini
// and process profiles, web identity, IMDS, with their nested STS/SSO clients) is dead weight in a
// Lambda bundle. Same export as the module it replaces: the SDK clients call defaultProvider(init).

import { fromEnv, type FromEnvInit } from '@aws-sdk/credential-provider-env';

export const defaultProvider = (init: FromEnvInit = {}) => fromEnv(init);

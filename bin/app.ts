// CDK entry point (cdk.json: `npx tsx bin/app.ts`): one stack per environment,
// svcnum-sandbox and svcnum-production, from lib/config.ts. Synth works offline: no Docker
// (Lambda bundles come from the local esbuild), no credentials, no context lookups.
import { createServiceApp } from '../lib/app';

createServiceApp().app.synth();

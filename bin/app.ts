// CDK entry point (cdk.json: `npx tsx bin/app.ts`): one stack per environment, svcnum-sandbox and
// svcnum-production, from the settings file the context names (`-c settings=<file>`; lib/settings.ts)
// and lib/config.ts. Synth works offline: no Docker (Lambda bundles come from the local esbuild),
// no credentials, no context lookups.
import { createServiceApp } from '../lib/app';
import { SettingsError } from '../lib/settings';

try {
  createServiceApp().app.synth();
} catch (error) {
  // Settings problems are the operator's to fix: their lines, not a stack trace.
  if (!(error instanceof SettingsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exitCode = 1;
}

// `npm run admin`: local/admin.ts from its bundle (local/admin-bundle.mjs), built when a source changed.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { adminBundle } from './admin-bundle.mjs';

// Lambda runs Node 22; the SDK's notice about Node 20 is noise on a laptop and in CI.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const { main } = await import(pathToFileURL(join(await adminBundle(), 'admin.mjs')).href);
await main(process.argv.slice(2));

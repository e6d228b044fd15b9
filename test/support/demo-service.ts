import { demoClient, ensureDemo, type DemoSetup } from '../../local/demo';
import type { LocalExtra } from '../../local/http-server';
import { startLocal, type LocalService } from '../../local/runner';

/**
 * The local runner on free ports with the built-in demo login client mounted at /demo (as
 * `npm start` has it), for the tests that drive the pages in Chromium.
 */
export async function startDemoService(dataDir: string): Promise<{ service: LocalService; demo: DemoSetup }> {
  let demoRoutes: LocalExtra | undefined;
  const service = await startLocal({
    dataDir,
    port: 0,
    dynamoPort: 0,
    grpcPort: 0,
    extra: () => (request, url, response) => (demoRoutes ? demoRoutes(request, url, response) : Promise.resolve(false)),
  });
  const demo = await ensureDemo(service.core, dataDir, service.issuer);
  demoRoutes = demoClient(service.issuer, demo.clientId);
  return { service, demo };
}

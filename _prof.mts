import http from 'node:http';
import { startTestService } from './test/support/service';
const service = await startTestService();
const { client, clientSecret } = await service.core.registration.createApiClient({ name: 'Prof', scope: 'messaging poll' });
const url = new URL(`http://127.0.0.1:${service.port}/oauth/token`);
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const auth = 'Basic ' + Buffer.from(`${client.clientId}:${clientSecret}`).toString('base64');
const body = 'grant_type=client_credentials&scope=messaging';
const one = () => new Promise<void>((resolve, reject) => {
  const req = http.request(url, { method: 'POST', agent, headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) } }, (res) => { res.resume(); res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(String(res.statusCode))))); });
  req.on('error', reject); req.end(body);
});
const run = async (ms: number) => { const end = Date.now() + ms; let n = 0; await Promise.all(Array.from({ length: 16 }, async () => { while (Date.now() < end) { await one(); n++; } })); return n; };
await run(2000);
const n = await run(6000);
console.log('requests', n, 'rps', n / 6);
await service.close();
process.exit(0);

import { connect } from 'node:http2';
import { startTestService } from './test/support/service';
import { CreateAgentRequest } from './grpc-service/gen/svcnum/provisioning/v1alpha1/agent_service';
const service = await startTestService();
const big = 'x'.repeat(900_000);
const msg = CreateAgentRequest.encode(CreateAgentRequest.fromPartial({ displayName: big })).finish();
const framed = Buffer.alloc(msg.length + 5); framed.writeUInt32BE(msg.length, 1); framed.set(msg, 5);
const session = connect(`http://127.0.0.1:${service.grpcPort}`, { maxSessionMemory: 1e6 });
session.on('remoteSettings', (s) => console.log('remote settings', s));
let ended = 0;
for (let n = 0; n < 40; n++) {
const stream = session.request({ ':method': 'POST', ':path': '/svcnum.provisioning.v1alpha1.AgentService/CreateAgent', 'content-type': 'application/grpc', te: 'trailers' });
stream.on('response', (h) => ended++);
for (let i = 0; i < 10; i++) stream.write(framed);
}
setInterval(() => console.log('sent', session.socket.bytesWritten, ended, session.state.remoteWindowSize), 500);
setTimeout(async () => { session.destroy(); await service.close(); process.exit(0); }, 4000);

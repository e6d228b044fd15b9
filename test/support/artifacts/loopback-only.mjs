// Preloaded (`node --import`) into the processes that run the deployed artifacts: any TCP
// connection to somewhere other than loopback (AWS's real endpoints, the instance metadata
// service) is refused before it leaves, and named on stderr for the test to find.
import net from 'node:net';

/** test/support/artifacts.ts looks for this mark. */
const BLOCKED_MARK = 'loopback-only: blocked';

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  // net.connect passes its normalised arguments as one array: [options, callback].
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const options =
    typeof first === 'object' && first !== null
      ? first
      : { port: first, host: typeof args[1] === 'string' ? args[1] : undefined };
  // A pipe (`path`, as http sets it to null otherwise) stays on the machine.
  if (!options.path) {
    const host = String(options.host ?? 'localhost');
    if (!(host === 'localhost' || host === '::1' || host === '[::1]' || /^127\./.test(host))) {
      process.stderr.write(`${BLOCKED_MARK} ${host}:${options.port}\n`);
      process.nextTick(() => this.destroy(new Error(`${BLOCKED_MARK} ${host}:${options.port}`)));
      return this;
    }
  }
  return connect.apply(this, args);
};

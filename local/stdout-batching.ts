// `npm start` logs one line per request at the default level (INFO). On Linux a write to a terminal
// or a pipe is a system call made at once, which also wakes the reader: with one per line, logging
// at the default level cost the local service about 30 % of its client_credentials throughput
// against LOG_LEVEL=SILENT (bench/start-vs-peer.ts). Here the lines written during one turn of the
// event loop leave together in one write at its end, in the order written; what is pending when
// the process exits leaves before it.

/** Past this many pending characters the lines leave at once (a burst never piles up). */
const MAX_PENDING = 64 * 1024;

export function batchStdoutWrites(stream: NodeJS.WriteStream = process.stdout): void {
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let pending = '';
  const flush = () => {
    if (pending === '') return;
    const text = pending;
    pending = '';
    write(text);
  };
  stream.write = ((chunk: unknown, ...rest: unknown[]) => {
    // Anything but a plain string (a Buffer, an encoding, a callback) goes as given, after what is pending.
    if (typeof chunk !== 'string' || rest.length > 0) {
      flush();
      return write(chunk, ...rest);
    }
    if (pending === '') setImmediate(flush);
    pending += chunk;
    if (pending.length > MAX_PENDING) flush();
    return true;
  }) as typeof stream.write;
  process.once('exit', flush);
}

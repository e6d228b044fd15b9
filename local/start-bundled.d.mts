/** The gRPC task's esbuild options, from package.json's build:grpc command (of `root`, default this repository). */
export function taskBuildOptions(root?: string): Record<string, string | boolean>;
/** `npm start`: builds `entry` of `root`, serves it, rebuilds and restarts it on a change; exits with its code. */
export function startBundled(options?: { root?: string; entry?: string }): Promise<void>;

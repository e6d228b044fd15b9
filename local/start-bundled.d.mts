/** The gRPC task's esbuild options, from package.json's build:grpc command (of `root`, default this repository). */
export function taskBuildOptions(root?: string): Record<string, string | boolean>;
/** `npm start`: builds `entry` of `root`, serves it, rebuilds and restarts it on a change; exits with its code. */
export function startBundled(options?: { root?: string; entry?: string }): Promise<void>;
/** The served process's environment: `env` with UV_THREADPOOL_SIZE sized for this machine unless `env` sets it. */
export function servedEnvironment(env?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;

import type { Context } from 'aws-lambda';
import { coreFromEnvironment } from '../core/adapters/aws-environment';
import type { Core } from '../core/service';
import type { HttpEvent, HttpResult } from './http';

type Handler = (event: HttpEvent, context: Context) => Promise<HttpResult>;

/** The exported Lambda handler of a route group: built on the first invocation, then reused. */
export function lazyHandler(create: (core: Core) => Handler): Handler {
  let built: Handler | undefined;
  return (event, context) => {
    built ??= create(coreFromEnvironment());
    return built(event, context);
  };
}

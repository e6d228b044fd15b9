import type { ProgrammableNumberView } from '../../core/provisioning/programmable';
import type { Core } from '../../core/service';
import type { NumberServiceServer, ProgrammableNumber } from '../gen/svcnum/provisioning/v1alpha1/number_service';
import { CallError, unary } from '../calls';
import { status } from '@grpc/grpc-js';
import { numberState, timestamp } from './convert';

const toProto = (number: ProgrammableNumberView): ProgrammableNumber => ({
  svcnumId: number.svcnumId,
  svcnum: number.svcnum,
  displayName: number.displayName,
  state: numberState(number.state),
  config: { autoReply: number.config.autoReply, forwardToSvcnumId: number.config.forwardToSvcnumId },
  createTime: timestamp(number.createTime),
  updateTime: timestamp(number.updateTime),
});

export function numberService(core: Core): NumberServiceServer {
  const { numbers } = core.provisioning;
  return {
    provisionNumber: unary(core, 'NumberService.ProvisionNumber', 'prov:numbers', async (caller, request) => toProto(await numbers.provision(caller, {
      requestId: request.requestId, displayName: request.displayName,
      ...(request.config ? { config: request.config } : {}),
    }))),
    getNumber: unary(core, 'NumberService.GetNumber', 'prov:numbers', async (caller, request) => toProto(await numbers.get(caller, request.svcnumId))),
    listNumbers: unary(core, 'NumberService.ListNumbers', 'prov:numbers', async (caller, request) => {
      const page = await numbers.list(caller, { pageSize: request.pageSize, pageToken: request.pageToken });
      return { numbers: page.items.map(toProto), nextPageToken: page.nextPageToken };
    }),
    configureProgrammable: unary(core, 'NumberService.ConfigureProgrammable', 'prov:numbers', async (caller, request) => {
      if (!request.config) throw new CallError(status.INVALID_ARGUMENT, 'config is required');
      return toProto(await numbers.configure(caller, { svcnumId: request.svcnumId, config: request.config, updatePaths: request.updateMask ?? [] }));
    }),
  };
}

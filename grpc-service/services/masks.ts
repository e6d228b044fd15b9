import type { MaskView } from '../../core/provisioning/masks';
import type { Modules } from '../../core/registry';
import type { Mask, MaskServiceServer } from '../gen/svcnum/provisioning/v1alpha1/mask_service';
import { unary } from '../calls';
import { numberState, timestamp } from './convert';

const toProto = (mask: MaskView): Mask => ({
  maskId: mask.maskId,
  svcnum: mask.svcnum,
  participantA: mask.participantA,
  participantB: mask.participantB,
  scope: mask.scope,
  state: numberState(mask.state),
  createTime: timestamp(mask.createTime),
  expireTime: timestamp(mask.expireTime),
});

export function maskService({ provisioning }: Pick<Modules, 'provisioning'>): MaskServiceServer {
  const { masks } = provisioning;
  return {
    createMask: unary(async (caller, request) =>
      toProto(
        await masks.create(caller, {
          requestId: request.requestId,
          ttlSeconds: request.ttlSeconds,
          participantA: request.participantA,
          participantB: request.participantB,
          scope: request.scope,
        }),
      ),
    ),
    getMask: unary(async (caller, request) => toProto(await masks.get(caller, request.maskId))),
    listMasks: unary(async (caller, request) => {
      const page = await masks.list(caller, { pageSize: request.pageSize, pageToken: request.pageToken });
      return { masks: page.items.map(toProto), nextPageToken: page.nextPageToken };
    }),
    closeMask: unary(async (caller, request) => toProto(await masks.close(caller, request.maskId))),
  };
}

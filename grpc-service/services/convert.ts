import type { NumberState as CoreNumberState } from '../../core/kernel/model';
import { NumberState } from '../gen/svcnum/provisioning/v1alpha1/common';

// Core values → protobuf values.

const STATES: Record<CoreNumberState, NumberState> = {
  active: NumberState.NUMBER_STATE_ACTIVE,
  suspended: NumberState.NUMBER_STATE_SUSPENDED,
  deactivated: NumberState.NUMBER_STATE_DEACTIVATED,
  quarantined: NumberState.NUMBER_STATE_QUARANTINED,
  expired: NumberState.NUMBER_STATE_EXPIRED,
};

export const numberState = (state: CoreNumberState) => STATES[state];

export const timestamp = (ms: number) => new Date(ms);

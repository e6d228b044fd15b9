import { ARecord, HostedZone, type IAliasRecordTarget, RecordTarget } from 'aws-cdk-lib/aws-route53';
import type { Construct } from 'constructs';

/**
 * The alias record of a name served by `target` (the API's custom domain, the gRPC NLB) in a hosted
 * zone the settings name by id and name: no lookup at synth. Its zone is the construct `Zone` of `scope`.
 */
export function aliasRecord(
  scope: Construct,
  id: string,
  zone: { id: string; name: string },
  recordName: string,
  target: IAliasRecordTarget,
): ARecord {
  return new ARecord(scope, id, {
    zone: HostedZone.fromHostedZoneAttributes(scope, 'Zone', { hostedZoneId: zone.id, zoneName: zone.name }),
    recordName,
    target: RecordTarget.fromAlias(target),
  });
}

import type { AliasView } from '../../core/directory/aliases';
import type { Modules } from '../../core/registry';
import type { Alias, AliasServiceServer } from '../gen/svcnum/provisioning/v1alpha1/alias_service';
import { unary } from '../calls';
import { timestamp } from './convert';

// AliasService: a token with prov:numbers or prov:agents gets in; the core then checks the
// scope the entity needs (prov:numbers for a programmable number, prov:agents for an agent).
export const ALIAS_SCOPES = ['prov:numbers', 'prov:agents'] as const;

const toProto = (alias: AliasView): Alias => ({
  alias: alias.alias,
  svcnumId: alias.svcnumId,
  createTime: timestamp(alias.createTime),
});

export function aliasService({ directory }: Pick<Modules, 'directory'>): AliasServiceServer {
  const { aliases } = directory;
  return {
    createAlias: unary(async (caller, request) =>
      toProto(await aliases.create(caller, { svcnumId: request.svcnumId, alias: request.alias })),
    ),
    deleteAlias: unary(async (caller, request) => {
      await aliases.remove(caller, request.alias);
      return {};
    }),
    listAliases: unary(async (caller, request) => ({
      aliases: (await aliases.list(caller, request.svcnumId)).map(toProto),
    })),
  };
}

import { MINUTE } from '../kernel/config';

// Limits of the public directory: aliases, resolve and discover. One place, so the docs, the
// proto comments, the tests and the code agree.

export const directoryLimits = {
  aliasMin: 3,
  aliasMax: 32,
  /** Aliases one entity may hold (exact under concurrency: the entity record counts them). */
  aliasesPerEntity: 5,
  /** How long an alias claim may take to commit; an uncommitted claim is void after it. */
  aliasClaimLease: MINUTE,
  discoverPageDefault: 20,
  discoverPageMax: 50,
  /**
   * Index entries one discover request reads at most (entries of hidden agents are skipped),
   * so a public request costs bounded work; a page may come back short with a next_page_token.
   */
  discoverScanMax: 100,
  /** Cache lifetimes of successful answers (seconds); errors are never cached. */
  resolveMaxAge: 10,
  discoverMaxAge: 30,
} as const;

//! SQL for a runner asking for its plan: the runner registry notes it, the branches it
//! serves get their offline owner (designating it where there is none or the owner is stale),
//! and — for a delta — the first look at what changed, all in one round trip, since a fleet
//! asks every few seconds per site.

use chrono::{DateTime, Utc};
use res_shared::wire::{OfflineOwner, RunnerHealth};
use sqlx::PgPool;
use uuid::Uuid;

use super::changes::{Glance, scoped_glance};

/// How a runner asking for its plan is recorded, and which branches it may own offline.
pub(crate) struct PlanContact<'a> {
    pub(crate) key_id: Uuid,
    pub(crate) runner_id: &'a str,
    pub(crate) health: Option<&'a RunnerHealth>,
    /// The branches whose offline owner it may be: a runner key's own; none for service
    /// keys, which are not a site's runner.
    pub(crate) branches: &'a [Uuid],
    /// It says it runs rules offline when it owns their branch (`true`: it may be
    /// designated) or that it never does (`false`: it gives its branches up); a caller that
    /// does not say (a person with curl, an older runner) changes nothing.
    pub(crate) may_own: Option<bool>,
    /// A runner silent this long is stale: its branches are handed over, and a runner
    /// coming back counts as online again only from then.
    pub(crate) stale_after_seconds: u32,
}

/// The registry write and the owner designation, as common table expressions over
/// parameters `$1`–`$11` (see [`PlanContact`] and `bind_contact`), ending in `mine`: the
/// owner of each of the caller's branches that has one.
///
/// The registry row is written only when the runner says something new (its version,
/// outbox, outage, state directory) or its presence is half the stale time old: a site
/// asking again and again costs a read, not a write. An update whose condition fails locks
/// nothing, where `INSERT … ON CONFLICT DO UPDATE … WHERE` locks (writes) the row on every
/// call — two thirds of PostgreSQL's time in the fleet mix of 2026-11-27. `last_plan_at`
/// moves with the row, so it is the last request within half the stale time.
/// A stale owner is handed over only to a runner that has itself been in contact for the
/// stale time: after a site-wide outage the owner may still be delivering its offline runs
/// when another runner of the branch is back first. A designation younger than the stale
/// time is never replaced, so of two runners asking at once one becomes the owner.
macro_rules! contact_ctes {
    () => {
        "WITH seen AS ( \
             UPDATE runners \
             SET version = COALESCE($3, runners.version), last_plan_at = now(), \
                 last_seen_at = now(), outbox_depth = $4, state_unwritable_since = $10, \
                 state_space_low_since = $11, \
                 online_since = CASE WHEN runners.last_seen_at \
                                          < now() - make_interval(secs => $8) \
                                     THEN now() ELSE runners.online_since END, \
                 last_outage_started_at = COALESCE($5, runners.last_outage_started_at), \
                 last_outage_ended_at = COALESCE($6, runners.last_outage_ended_at) \
             WHERE runners.key_id = $1 AND runners.runner_id = $2 \
               AND (runners.last_plan_at IS NULL \
                OR runners.last_seen_at < now() - make_interval(secs => $8 / 2) \
                OR runners.outbox_depth IS DISTINCT FROM $4 \
                OR runners.state_unwritable_since IS DISTINCT FROM $10 \
                OR runners.state_space_low_since IS DISTINCT FROM $11 \
                OR runners.version IS DISTINCT FROM COALESCE($3, runners.version) \
                OR runners.last_outage_started_at IS DISTINCT FROM \
                   COALESCE($5, runners.last_outage_started_at)) \
             RETURNING online_since), \
         known AS (SELECT online_since FROM runners WHERE key_id = $1 AND runner_id = $2), \
         added AS ( \
             INSERT INTO runners (key_id, runner_id, version, last_plan_at, outbox_depth, \
                                  last_outage_started_at, last_outage_ended_at, \
                                  state_unwritable_since, state_space_low_since) \
             SELECT $1, $2, $3, now(), $4, $5, $6, $10, $11 WHERE NOT EXISTS (SELECT FROM known) \
             ON CONFLICT (key_id, runner_id) DO NOTHING \
             RETURNING online_since), \
         me AS ( \
             SELECT COALESCE((SELECT online_since FROM seen), (SELECT online_since FROM added), \
                             (SELECT online_since FROM known)) AS online_since), \
         owners AS ( \
             SELECT b.id AS branch_id, o.key_id, o.runner_id, r.last_plan_at, \
                    COALESCE(r.last_seen_at > now() - make_interval(secs => $8) \
                             AND k.revoked_at IS NULL \
                             AND (b.id = ANY(k.branch_ids) OR b.brand_id = ANY(k.brand_ids)), \
                             false) AS present \
             FROM branches b \
             LEFT JOIN branch_offline_owners o ON o.branch_id = b.id \
             LEFT JOIN runners r ON r.key_id = o.key_id AND r.runner_id = o.runner_id \
             LEFT JOIN api_keys k ON k.id = o.key_id \
             WHERE b.id = ANY($7)), \
         released AS ( \
             DELETE FROM branch_offline_owners \
             WHERE $9 IS FALSE AND key_id = $1 AND runner_id = $2 AND branch_id = ANY($7) \
             RETURNING branch_id), \
         taken AS ( \
             INSERT INTO branch_offline_owners AS t (branch_id, key_id, runner_id) \
             SELECT owners.branch_id, $1, $2 FROM owners, me \
             WHERE $9 IS TRUE AND (owners.key_id IS NULL \
                OR (NOT owners.present \
                    AND (owners.key_id, owners.runner_id) <> ($1, $2) \
                    AND me.online_since <= now() - make_interval(secs => $8))) \
             ON CONFLICT (branch_id) DO UPDATE \
             SET key_id = EXCLUDED.key_id, runner_id = EXCLUDED.runner_id, since = now() \
             WHERE t.since < now() - make_interval(secs => $8) \
             RETURNING t.branch_id), \
         mine AS ( \
             SELECT owners.branch_id, \
                    CASE WHEN taken.branch_id IS NULL THEN owners.runner_id ELSE $2 END \
                        AS runner_id, \
                    (taken.branch_id IS NOT NULL \
                     OR (owners.key_id = $1 AND owners.runner_id = $2)) AS is_you, \
                    CASE WHEN taken.branch_id IS NULL THEN owners.last_plan_at ELSE now() END \
                        AS last_plan_at \
             FROM owners LEFT JOIN taken ON taken.branch_id = owners.branch_id \
             WHERE (owners.key_id IS NOT NULL OR taken.branch_id IS NOT NULL) \
               AND owners.branch_id NOT IN (SELECT branch_id FROM released)) "
    };
}

#[derive(sqlx::FromRow)]
struct OwnerRow {
    branch_id: Uuid,
    runner_id: String,
    is_you: bool,
    last_plan_at: Option<DateTime<Utc>>,
}

impl OwnerRow {
    fn owner(self) -> OfflineOwner {
        OfflineOwner {
            branch_id: self.branch_id,
            runner_id: self.runner_id,
            is_you: self.is_you,
            last_plan_at: self.last_plan_at,
        }
    }
}

/// The contact's parameters `$1`–`$11`, in the order `contact_ctes` reads them.
fn bind_contact<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    contact: &'q PlanContact<'q>,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    let health = contact.health;
    let outage = health.and_then(|h| h.last_outage);
    query
        .bind(contact.key_id)
        .bind(contact.runner_id)
        .bind(health.and_then(|h| h.version.as_deref()))
        .bind(
            health
                .and_then(|h| h.outbox_depth)
                .map(|d| i32::try_from(d).unwrap_or(i32::MAX)),
        )
        .bind(outage.map(|o| o.started_at))
        .bind(outage.map(|o| o.ended_at))
        .bind(contact.branches)
        .bind(f64::from(contact.stale_after_seconds))
        .bind(contact.may_own)
        .bind(health.and_then(|h| h.state_unwritable_since))
        .bind(health.and_then(|h| h.state_space_low_since))
}

/// A runner asked for its plan: notes it and answers the offline owner of each of its
/// branches (see `contact_ctes`).
pub(crate) async fn noted(
    pool: &PgPool,
    contact: &PlanContact<'_>,
) -> Result<Vec<OfflineOwner>, sqlx::Error> {
    let mut tx = super::begin_generic(pool).await?;
    let rows: Vec<OwnerRow> = bind_contact(
        sqlx::query_as(concat!(
            contact_ctes!(),
            "SELECT branch_id, runner_id, is_you, last_plan_at FROM mine ORDER BY branch_id"
        )),
        contact,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(OwnerRow::owner).collect())
}

#[derive(sqlx::FromRow)]
struct GlancedRow {
    snapshot: String,
    now: DateTime<Utc>,
    changed: bool,
    branch_id: Option<Uuid>,
    runner_id: Option<String>,
    is_you: Option<bool>,
    last_plan_at: Option<DateTime<Utc>>,
}

/// [`noted`], and at once the first look at what changed in the contact's branches since
/// the cursor (its snapshot text and time, `$12` and `$13`): the owners and the look share
/// one snapshot.
pub(crate) async fn noted_with_glance(
    pool: &PgPool,
    contact: &PlanContact<'_>,
    cursor: (&str, DateTime<Utc>),
) -> Result<(Vec<OfflineOwner>, Glance), sqlx::Error> {
    let mut tx = super::begin_generic(pool).await?;
    let rows: Vec<GlancedRow> = bind_contact(
        sqlx::query_as(concat!(
            contact_ctes!(),
            ", look AS (SELECT ",
            scoped_glance!("$12", "$13", "$7"),
            ") SELECT look.snapshot, look.now, look.changed, mine.branch_id, mine.runner_id, \
                      mine.is_you, mine.last_plan_at \
               FROM look LEFT JOIN mine ON true ORDER BY mine.branch_id"
        )),
        contact,
    )
    .bind(cursor.0)
    .bind(cursor.1)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let glance = rows.first().map(|row| Glance {
        snapshot: row.snapshot.clone(),
        now: row.now,
        changed: row.changed,
    });
    let owners = rows
        .into_iter()
        .filter_map(|row| {
            Some(OwnerRow {
                branch_id: row.branch_id?,
                runner_id: row.runner_id?,
                is_you: row.is_you?,
                last_plan_at: row.last_plan_at,
            })
        })
        .map(OwnerRow::owner)
        .collect();
    let glance = glance.ok_or_else(|| {
        sqlx::Error::Protocol("the plan contact statement returned no row".to_owned())
    })?;
    Ok((owners, glance))
}

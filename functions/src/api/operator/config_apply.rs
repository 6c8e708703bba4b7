//! `config_apply`: a brand or catalogue document applied in one transaction, or (with
//! `dry_run`) only what it would change. Validated first by the code that runs it; nothing
//! is written on any refusal. Each apply is a revision of its scope (docs/configure.md).

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use res_config::{Diff, Document};
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    ConfigApplyRequest, ConfigApplyResponse, ConfigProblem, DocumentRefusal, ErrorBody,
};
use uuid::Uuid;

use super::config::{ConfigScope, may_configure, stored_document_on, unknown_brand};
use crate::access::{Caller, Scope};
use crate::api::require_text;
use crate::auth::Administrator;
use crate::db;
use crate::db::config_catalogue::CatalogueApply;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// The largest `config_apply` body: a document of `res_config::MAX_DOCUMENT_BYTES` as a
/// JSON string, escapes included.
pub(crate) const MAX_APPLY_BODY_BYTES: usize = 2 * res_config::MAX_DOCUMENT_BYTES;

/// Apply a brand or catalogue document in one transaction (or, with `dry_run`, only say
/// what would change): validated first by the code that runs it, nothing written on any
/// refusal. A brand document without an id creates the brand (a platform-wide key).
#[utoipa::path(
    post,
    path = "/functions/v1/config_apply",
    request_body = ConfigApplyRequest,
    responses(
        (status = 200, description = "What changed (or would), and the revision now", body = ConfigApplyResponse),
        (status = 403, description = "Not an admin key, or the catalogue without a platform-wide key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 409, description = "Objects it changes were changed since its base_revision (stale_revision), stored names a document cannot tell apart (ambiguous_names), or what a catalogue leaves out is still used (in_use)", body = ErrorBody),
        (status = 413, description = "Body over 32 MiB", body = ErrorBody),
        (status = 422, description = "The document has problems: every one at its path (invalid_document)", body = DocumentRefusal),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn apply(
    State(state): State<AppState>,
    caller: Administrator,
    ApiJson(request): ApiJson<ConfigApplyRequest, MAX_APPLY_BODY_BYTES>,
) -> Result<Json<ConfigApplyResponse>, ApiError> {
    apply_for(&state, &caller, request).await.map(Json)
}

/// [`apply`] over typed input, for the console.
pub(crate) async fn apply_for(
    state: &AppState,
    Administrator(caller): &Administrator,
    mut request: ConfigApplyRequest,
) -> Result<ConfigApplyResponse, ApiError> {
    let message = request.message.clone().unwrap_or_default();
    if !message.is_empty() {
        require_text("message", &message, 500)?;
    }
    // Parsing a document of thousands of branches is CPU work: off the async workers.
    let text = std::mem::take(&mut request.document);
    let desired = tokio::task::spawn_blocking(move || res_config::parse(&text))
        .await
        .map_err(|e| ApiError::Internal(format!("reading the document failed: {e}")))?
        .map_err(|p| ApiError::invalid_document(vec![p], vec![]))?;
    let job = Job {
        state,
        caller,
        request: &request,
        message: &message,
        now: chrono::Utc::now(),
    };
    match (&desired.catalogue, &desired.brand) {
        (Some(_), None) => job.catalogue(desired).await,
        (None, Some(_)) => job.brand(desired).await,
        (Some(_), Some(_)) => Err(refused(
            "$",
            "apply the catalogue and a brand as two documents: they have different owners and revisions",
        )),
        (None, None) => Err(refused(
            "$",
            "a document to apply needs a `brand` or a `catalogue`",
        )),
    }
}

/// One apply request.
struct Job<'a> {
    state: &'a AppState,
    caller: &'a Caller,
    request: &'a ConfigApplyRequest,
    message: &'a str,
    now: chrono::DateTime<chrono::Utc>,
}

fn refused(path: &str, message: &str) -> ApiError {
    ApiError::invalid_document(
        vec![res_config::Problem {
            path: path.into(),
            message: message.into(),
        }],
        vec![],
    )
}

impl Job<'_> {
    async fn brand(&self, mut desired: Document) -> Result<ConfigApplyResponse, ApiError> {
        let Some(brand) = desired.brand.as_ref() else {
            return Err(refused("$", "a document to apply needs a `brand`"));
        };
        let mut tx = self.state.pool.begin().await?;
        let (brand_id, created) = match brand.id {
            Some(id) => {
                may_configure(self.state, self.caller, ConfigScope::Brand(id)).await?;
                // One apply of a brand at a time: the second waits, then sees the first's
                // revision.
                db::config::lock_brand(&mut tx, id)
                    .await?
                    .ok_or_else(|| unknown_brand(id))?;
                (id, false)
            }
            None => self.brand_by_name(&mut tx, brand).await?,
        };
        let catalogue = db::config::catalogue(&mut tx).await?;
        ambiguous_in_catalogue(brand, &catalogue)?;
        let read = if created {
            None
        } else {
            self.refuse_if_stale(&mut tx, Some(brand_id), &desired, Some(&catalogue))
                .await?
        };
        // Checking the document (CPU) and reading the stored brand (the database) at once.
        let checking = tokio::task::spawn_blocking(move || {
            res_config::resolve_names(&mut desired, Some(&catalogue));
            let report = res_config::validate(&desired, Some(&catalogue));
            (desired, catalogue, report)
        });
        let stored = match read {
            Some(read) => Ok(read),
            None => stored_document_on(&mut tx, ConfigScope::Brand(brand_id)).await,
        };
        let (mut desired, catalogue, report) = checking
            .await
            .map_err(|e| ApiError::Internal(format!("checking the document failed: {e}")))?;
        let (mut current_doc, latest) = stored?;
        let Some(current) = current_doc.brand.take() else {
            return Err(unknown_brand(brand_id));
        };
        let Some(brand) = desired.brand.as_ref() else {
            return Err(refused("$", "a document to apply needs a `brand`"));
        };
        let archived =
            db::config_archive::of_brand(&mut tx, brand_id, &res_config::brand_ids(brand)).await?;
        let mut report = report;
        let mut problems = std::mem::take(&mut report.errors);
        problems.extend(res_config::unknown_ids(&current, brand, &archived));
        let known: Vec<res_config::KnownSecret> = db::secrets::scopes(&mut tx, brand_id)
            .await?
            .into_iter()
            .map(|(name, branch_ids)| res_config::KnownSecret { name, branch_ids })
            .collect();
        let references =
            res_config::check_secret_references(brand, Some(&current), &catalogue, &known);
        problems.extend(references.errors);
        report.warnings.extend(references.warnings);
        let names: Vec<String> = res_config::secret_names(brand, &catalogue)
            .into_iter()
            .collect();
        let secrets = if names.is_empty() {
            Vec::new()
        } else {
            db::secrets::uses(&mut tx, brand_id, &names, desired.base_revision).await?
        };
        if !problems.is_empty() {
            return Err(ApiError::invalid_document(problems, report.warnings));
        }
        // Compared (and written) as it will be stored: defaults in each rule, times as
        // export writes them.
        desired.normalize();
        // A new brand is a created object in the diff, not a renamed empty one.
        current_doc.brand = (!created).then(|| current.clone());
        let mut diff = res_config::diff(
            &current_doc,
            &desired,
            Some(&catalogue),
            self.now,
            self.request.prune,
        );
        diff.mark_restored(&desired, &archived);
        if self.request.dry_run || diff.changes.is_empty() {
            return answer(false, latest, &diff, report.warnings, secrets);
        }
        let Some(desired_brand) = &desired.brand else {
            return Err(ApiError::Internal("the brand went missing".into()));
        };
        let apply = db::config_apply::Apply {
            brand_id,
            current: &current,
            desired: desired_brand,
            catalogue: &catalogue,
            moved: db::config_apply::moved_branch_rules(&diff),
            archived: &archived,
            prune: self.request.prune,
            now: self.now,
        };
        let (pending, stored) = db::config_apply::prepare(&mut tx, &apply).await?;
        let applied = Document {
            brand: Some(stored),
            ..Document::default()
        };
        let revision = self
            .record(&mut tx, Some(brand_id), &applied, &diff)
            .await?;
        pending.flush(&mut tx, &apply).await?;
        tx.commit().await?;
        tracing::info!(%brand_id, revision, created, changes = diff.changes.len(), "configuration applied");
        answer(true, revision, &diff, report.warnings, secrets)
    }

    /// The brand a document without an id names: the one of that name in the caller's
    /// scope (locked), or a new one when a platform-wide key names none. Answers its id and
    /// whether it is new.
    async fn brand_by_name(
        &self,
        tx: &mut sqlx::PgConnection,
        brand: &res_config::Brand,
    ) -> Result<(Uuid, bool), ApiError> {
        let named = db::config::brands_named(tx, &brand.name).await?;
        let platform = matches!(self.caller.scope(), Scope::All);
        let visible: Vec<Uuid> = if platform {
            named
        } else {
            let mine = db::api_keys::brands_of(&self.state.pool, self.caller.key_id).await?;
            named.into_iter().filter(|id| mine.contains(id)).collect()
        };
        match visible.as_slice() {
            [id] => {
                db::config::lock_brand(tx, *id)
                    .await?
                    .ok_or_else(|| unknown_brand(*id))?;
                Ok((*id, false))
            }
            [] if platform => Ok((
                db::config::create_brand(tx, &brand.name, &brand.zone).await?,
                true,
            )),
            // Another brand's name is as unknown as a name no brand has.
            [] => Err(ApiError::NotFound(format!(
                "brand '{}' not found (brand.name names a brand of your key; new brands are made with a platform-wide key)",
                brand.name
            ))),
            several => Err(ApiError::conflict(
                ErrorCode::AmbiguousNames,
                format!(
                    "{} brands are called '{}'; give brand.id (resctl export prints it)",
                    several.len(),
                    brand.name
                ),
            )),
        }
    }

    async fn catalogue(&self, mut desired: Document) -> Result<ConfigApplyResponse, ApiError> {
        may_configure(self.state, self.caller, ConfigScope::Catalogue).await?;
        let mut tx = self.state.pool.begin().await?;
        db::config::lock_catalogue(&mut tx).await?;
        let (current_doc, latest) =
            match self.refuse_if_stale(&mut tx, None, &desired, None).await? {
                Some(read) => read,
                None => stored_document_on(&mut tx, ConfigScope::Catalogue).await?,
            };
        let current = current_doc.catalogue.clone().unwrap_or_default();
        res_config::resolve_names(&mut desired, None);
        let Some(after) = desired.catalogue.as_ref() else {
            return Err(refused("$", "a document to apply needs a `catalogue`"));
        };
        let report = res_config::validate(&desired, None);
        let archived =
            db::config_archive::of_catalogue(&mut tx, &res_config::catalogue_ids(after)).await?;
        let mut problems = report.errors;
        problems.extend(res_config::unknown_catalogue_ids(
            &current, after, &archived,
        ));
        if !problems.is_empty() {
            return Err(ApiError::invalid_document(problems, report.warnings));
        }
        let mut diff = res_config::diff(&current_doc, &desired, None, self.now, self.request.prune);
        diff.mark_restored(&desired, &archived);
        let apply = CatalogueApply {
            current: &current,
            desired: after,
            archived: &archived,
            prune: self.request.prune,
        };
        let used = db::config_catalogue::still_used(&mut tx, &apply).await?;
        if !used.is_empty() {
            return Err(ApiError::conflict(
                ErrorCode::InUse,
                format!(
                    "{}; take them out of those brands first, or keep them in the catalogue",
                    used.join("; ")
                ),
            ));
        }
        if self.request.dry_run || diff.changes.is_empty() {
            return answer(false, latest, &diff, report.warnings, Vec::new());
        }
        let moved = db::config_catalogue::write(&mut tx, &apply).await?;
        // Branch rules that follow a moved default schedule run on the new one at once.
        let (applied, _) = stored_document_on(&mut tx, ConfigScope::Catalogue).await?;
        let stored = applied.catalogue.clone().unwrap_or_default();
        let moved_names: Vec<&str> = stored
            .rules
            .iter()
            .filter(|r| r.id.is_some_and(|id| moved.contains(&id)))
            .map(|r| r.name.as_str())
            .collect();
        for brand_id in db::config_catalogue::brands_following(&mut tx, &moved).await? {
            if let Some(brand) = db::config::brand(&mut tx, brand_id).await? {
                db::config_catalogue::reschedule_followers(
                    &mut tx,
                    &brand,
                    &moved_names,
                    &stored,
                    self.now,
                )
                .await?;
            }
        }
        let revision = self.record(&mut tx, None, &applied, &diff).await?;
        tx.commit().await?;
        tracing::info!(revision, changes = diff.changes.len(), "catalogue applied");
        answer(true, revision, &diff, report.warnings, Vec::new())
    }

    /// Refuses a document whose `base_revision` is stale for what it changes, unless
    /// forced — first, before the document is checked or its runs previewed (seconds for a
    /// brand of thousands of branches): only the objects' fields are compared, so the
    /// refusal comes at once. When it had to read the stored document (and the document
    /// passed), answers it with its revision, so the apply does not read it again.
    async fn refuse_if_stale(
        &self,
        tx: &mut sqlx::PgConnection,
        brand_id: Option<Uuid>,
        desired: &Document,
        catalogue: Option<&res_config::Catalogue>,
    ) -> Result<Option<(Document, i64)>, ApiError> {
        let Some(base) = desired.base_revision.filter(|_| !self.request.force) else {
            return Ok(None);
        };
        if base == db::config::latest_revision(tx, brand_id).await? {
            return Ok(None);
        }
        let scope = brand_id.map_or(ConfigScope::Catalogue, ConfigScope::Brand);
        let (current, latest) = stored_document_on(tx, scope).await?;
        // Compared as it would be stored (names, defaults, times), like the full diff.
        let mut probe = desired.clone();
        res_config::resolve_names(&mut probe, catalogue);
        probe.normalize();
        let changes = res_config::changed_objects(&current, &probe, self.request.prune);
        stale(tx, brand_id, base, latest, &changes).await?;
        Ok(Some((current, latest)))
    }

    /// Records the apply as the scope's next revision, with the document as now stored.
    async fn record(
        &self,
        tx: &mut sqlx::PgConnection,
        brand_id: Option<Uuid>,
        applied: &Document,
        diff: &Diff,
    ) -> Result<i64, ApiError> {
        Ok(db::config_apply::record_revision(
            tx,
            brand_id,
            (self.caller.key_id, &self.caller.key_name),
            self.message,
            applied,
            diff,
        )
        .await?)
    }
}

fn diff_json(diff: &Diff) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(diff)
        .map_err(|e| ApiError::Internal(format!("the diff would not serialise: {e}")))
}

fn answer(
    applied: bool,
    revision: i64,
    diff: &Diff,
    warnings: Vec<res_config::Problem>,
    secrets: Vec<res_shared::wire::ConfigSecretUse>,
) -> Result<ConfigApplyResponse, ApiError> {
    Ok(ConfigApplyResponse {
        applied,
        revision,
        diff: diff_json(diff)?,
        summary: diff.to_string(),
        warnings: warnings
            .into_iter()
            .map(|p| ConfigProblem {
                path: p.path,
                message: p.message,
            })
            .collect(),
        secrets,
    })
}

/// Refuses a brand document that names a catalogue rule or template two share (the
/// document could mean either).
fn ambiguous_in_catalogue(
    brand: &res_config::Brand,
    catalogue: &res_config::Catalogue,
) -> Result<(), ApiError> {
    let rules = brand
        .rules
        .keys()
        .filter(|name| catalogue.rules.iter().filter(|r| &&r.name == name).count() > 1);
    let templates = brand
        .branches
        .iter()
        .flat_map(|b| b.rules.values().flat_map(|r| r.actions.keys()))
        .filter(|name| {
            catalogue
                .action_templates
                .iter()
                .filter(|t| &&t.name == name)
                .count()
                > 1
        });
    let named: Vec<String> = rules
        .map(|n| format!("rule '{n}'"))
        .chain(templates.map(|n| format!("action template '{n}'")))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    Err(ApiError::conflict(
        ErrorCode::AmbiguousNames,
        format!(
            "the catalogue has more than one {}; rename them in the catalogue first",
            named.join(", ")
        ),
    ))
}

/// Refuses an apply whose author started from `base` when objects it changes were changed
/// by a later revision (409 `stale_revision`, naming them and who changed them); passes
/// when the later revisions touched other objects.
async fn stale(
    conn: &mut sqlx::PgConnection,
    brand_id: Option<Uuid>,
    base: i64,
    latest: i64,
    mine: &res_config::Diff,
) -> Result<(), ApiError> {
    let export_again = "export again (resctl export), or apply with --force";
    if !(0..=latest).contains(&base) {
        return Err(ApiError::conflict(
            ErrorCode::StaleRevision,
            format!(
                "base_revision {base} is not a revision of this {} (the latest is {latest}); {export_again}",
                if brand_id.is_some() {
                    "brand"
                } else {
                    "catalogue"
                }
            ),
        ));
    }
    // The latest change of each object since `base`, looked up (not scanned: a brand-wide
    // change is tens of thousands of them).
    let since: HashMap<(String, String), (i64, String)> =
        db::config_apply::changed_since(conn, brand_id, base)
            .await?
            .into_iter()
            .map(|(kind, name, revision, who)| ((kind, name), (revision, who)))
            .collect();
    let mut touched: Vec<String> = Vec::new();
    for change in &mine.changes {
        if let Some((revision, who)) = since.get(&(change.kind.clone(), change.name.clone())) {
            touched.push(format!(
                "{} '{}' (revision {revision}, by {who})",
                change.kind, change.name
            ));
        }
    }
    if touched.is_empty() {
        return Ok(());
    }
    // A brand-wide change touches thousands: the first ones name it.
    let more = touched.len().saturating_sub(STALE_NAMED);
    touched.truncate(STALE_NAMED);
    if more > 0 {
        touched.push(format!("and {more} more"));
    }
    Err(ApiError::conflict(
        ErrorCode::StaleRevision,
        format!(
            "changed since revision {base} (the latest is {latest}): {}; {export_again}",
            touched.join(", ")
        ),
    ))
}

/// How many objects a stale refusal names.
const STALE_NAMED: usize = 20;

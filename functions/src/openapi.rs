//! The OpenAPI document, generated from the handlers and wire types.

use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The functions' OpenAPI description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "RES functions",
        description = "Execution plans, claims, heartbeats, violations and next run times for RES site runners. Every function takes POST with a JSON body and `Authorization: Bearer <token>`."
    ),
    paths(
        crate::api::plan::get_execution_plan,
        crate::api::claim::claim,
        crate::api::claim::claim_batch,
        crate::api::heartbeat::heartbeat,
        crate::api::heartbeat::heartbeat_batch,
        crate::api::violations::create_violation,
        crate::api::next_run::set_next_run_time,
        crate::api::next_run::set_next_run_time_batch,
        crate::api::pause::pause,
        crate::api::register::register,
        crate::api::operator::rules::run_now,
        crate::api::operator::rules::pause,
        crate::api::operator::rules::resume,
        crate::api::operator::rules::force_stop,
        crate::api::operator::cancel::cancel,
        crate::api::operator::history::list,
        crate::api::operator::inspect::describe,
        crate::api::operator::inspect::show,
        crate::api::operator::fleet::rules,
        crate::api::operator::overview::fleet_summary,
        crate::api::operator::acknowledge::acknowledge,
        crate::api::operator::fleet::runners,
        crate::api::operator::fleet::violations,
        crate::api::operator::fleet::keys,
        crate::api::operator::keys::create,
        crate::api::operator::keys::rotate,
        crate::api::operator::keys::revoke,
        crate::api::operator::config::export,
        crate::api::operator::config_apply::apply,
        crate::api::operator::config::history,
        crate::api::operator::config::show,
        crate::api::operator::channels::create,
        crate::api::operator::channels::list,
        crate::api::operator::channels::delete,
        crate::api::operator::channels::test,
        crate::api::health::health,
    ),
    modifiers(&BearerToken)
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// `GET /functions/v1/openapi.json`.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

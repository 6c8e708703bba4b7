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
    modifiers(&BearerToken, &Functions)
)]
pub struct ApiDoc;

struct BearerToken;

/// The functions' operations and their schemas, from the router's one table of functions.
struct Functions;

impl Modify for Functions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi.merge(crate::router::FunctionPaths::openapi());
    }
}

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

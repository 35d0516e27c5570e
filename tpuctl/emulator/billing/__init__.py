"""The Cloud Billing Catalog API (cloudbilling.googleapis.com v1): services and SKUs."""

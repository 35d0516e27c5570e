"""The client factory: the adapters tpuctl talks to the cloud through, each made with the
endpoint and credentials that cloud/endpoints.py decides.

Google client libraries are imported inside the methods, so `import tpuctl`
and `tpuctl --help` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpuctl.cloud.endpoints import Endpoints

if TYPE_CHECKING:
    from google.cloud.cloudquotas_v1 import CloudQuotasClient
    from google.cloud.storage import Client as StorageClient
    from google.cloud.tpu_v2 import TpuClient

    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.billing import CatalogApi
    from tpuctl.cloud.compute.api import ComputeTpuApi
    from tpuctl.cloud.compute.project import ProjectMetadataApi
    from tpuctl.cloud.iam import IamApi
    from tpuctl.cloud.image_registry import ImageRegistry
    from tpuctl.cloud.monitoring import MonitoringApi
    from tpuctl.cloud.oslogin import OsLoginApi
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.service_usage import ServiceUsageApi
    from tpuctl.cloud.ssh import SshApi
    from tpuctl.cloud.storage import Bucket
    from tpuctl.cloud.tpu.api import TpuApi


class ClientFactory(Endpoints):
    """Makes the cloud clients for one invocation of tpuctl, each with the endpoint and
    credentials its `Endpoints` say."""

    # -- clients ------------------------------------------------------------
    def tpu_client(self) -> TpuClient:
        from google.api_core.client_options import ClientOptions
        from google.cloud import tpu_v2

        return tpu_v2.TpuClient(
            transport="rest",
            credentials=self.credentials,
            client_options=ClientOptions(api_endpoint=self.tpu_endpoint),
        )

    def tpu(self) -> TpuApi:
        from tpuctl.cloud.tpu.api import TpuApi

        return TpuApi(
            self.tpu_client,  # made on first use: the lists go over REST
            where=self.describe_endpoint(),
            unreachable_hint=self.unreachable_hint(),
            session=self._authorized_session,
            endpoint=self.tpu_endpoint,
        )

    def quotas_client(self) -> CloudQuotasClient:
        from google.api_core.client_options import ClientOptions
        from google.cloud import cloudquotas_v1

        return cloudquotas_v1.CloudQuotasClient(
            transport="rest",
            credentials=self.credentials,
            client_options=ClientOptions(api_endpoint=self.quotas_endpoint),
        )

    def quotas(self) -> QuotaApi:
        from tpuctl.cloud.quota import QuotaApi

        return QuotaApi(
            self.quotas_client(),
            where=self.describe_endpoint(),
            unreachable_hint=self.unreachable_hint(),
        )

    def service_usage(self) -> ServiceUsageApi:
        from google.api_core.client_options import ClientOptions
        from google.cloud import service_usage_v1

        from tpuctl.cloud.service_usage import ServiceUsageApi

        client = service_usage_v1.ServiceUsageClient(
            transport="rest",
            credentials=self.credentials,
            client_options=ClientOptions(api_endpoint=self.service_usage_endpoint),
        )
        return ServiceUsageApi(
            client, where=self.describe_endpoint(), unreachable_hint=self.unreachable_hint()
        )

    # -- Cloud Billing's catalog of prices -------------------------------------------
    def billing_catalog(self) -> CatalogApi:
        from tpuctl.cloud.billing import CatalogApi

        return CatalogApi(
            self._authorized_session,
            self.billing_endpoint,
            where=f"Cloud Billing ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    # -- Cloud Monitoring --------------------------------------------------------
    def monitoring(self) -> MonitoringApi:
        from tpuctl.cloud.monitoring import MonitoringApi

        return MonitoringApi(
            self._authorized_session,
            self.monitoring_endpoint,
            where=f"Cloud Monitoring ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    # -- Cloud Storage -------------------------------------------------------
    def storage_client(self, project: str | None = None) -> StorageClient:
        """google-cloud-storage's Client for `project`, which owns the buckets it creates
        (None: the endpoint's default project, or the one the credentials name)."""
        from google.cloud import storage

        endpoint = self.storage_endpoint
        return storage.Client(
            project=project or self.defaults().get("project"),
            credentials=self.credentials,
            client_options={"api_endpoint": endpoint} if endpoint else None,
        )

    def bucket(self, name: str, project: str | None = None) -> Bucket:
        """The Bucket adapter for gs://`name` (`name` without the scheme)."""
        from tpuctl.cloud.storage import Bucket

        where = f"Cloud Storage ({self.describe_endpoint()})"
        return Bucket(
            self.storage_client(project),
            name,
            where=where,
            unreachable_hint=self.unreachable_hint(),
        )

    # -- OS Login, and the project metadata that says whether it applies ------------------
    def project_metadata(self) -> ProjectMetadataApi:
        from tpuctl.cloud.compute.project import ProjectMetadataApi

        return ProjectMetadataApi(
            self._authorized_session,
            self.compute_endpoint,
            where=f"the Compute Engine API ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    def compute_tpu(self) -> ComputeTpuApi:
        """TPU VMs on Compute Engine, behind the same protocol as the TPU API's adapter."""
        from tpuctl.cloud.compute.multislice import ComputeMultisliceApi

        return ComputeMultisliceApi(
            self._authorized_session,
            self.compute_endpoint,
            where=f"Compute Engine ({self.describe_endpoint()})",
            hint=self.unreachable_hint(),
        )

    def backend(self, key: str) -> TpuBackend:
        """The adapter of one TPU API, by its registry key (`--api`)."""
        from tpuctl.cloud import registry

        return registry.kind(key).build(self)

    def backends(self) -> list[TpuBackend]:
        """Every TPU API's adapter, in the registry's look-up order."""
        from tpuctl.cloud import registry

        return [k.build(self) for k in registry.KINDS]

    def iam(self) -> IamApi:
        """Resource Manager (the caller's permissions, the project's number) and IAM (the
        project's service accounts): Google's endpoints, or the emulator's subsets."""
        from tpuctl.cloud.iam import IamApi

        emulated = f"http://{self._emulator}" if self._emulator else None
        return IamApi(
            self._authorized_session,
            emulated or "https://cloudresourcemanager.googleapis.com",
            emulated or "https://iam.googleapis.com",
            emulated or "https://policytroubleshooter.googleapis.com",
            where=f"Cloud Resource Manager and IAM ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    def images(self) -> ImageRegistry:
        """Artifact Registry's Docker API, as the caller: resolves images to digests
        (Google's LOCATION-docker.pkg.dev, or the emulator's registry port)."""
        from tpuctl.cloud.image_registry import ImageRegistry

        return ImageRegistry(
            self.registry_root,
            self.registry_access_token,
            self.account,
            where=f"Artifact Registry ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    def oslogin_client(self) -> Any:
        from google.api_core.client_options import ClientOptions
        from google.cloud import oslogin_v1

        return oslogin_v1.OsLoginServiceClient(
            transport="rest",
            credentials=self.credentials,
            client_options=ClientOptions(api_endpoint=self.oslogin_endpoint),
        )

    def oslogin(self) -> OsLoginApi:
        """The OS Login adapter; it makes its client, asks the account and reads the
        project's metadata only when first needed."""
        from tpuctl.cloud.oslogin import OsLoginApi

        return OsLoginApi(
            self.oslogin_client,
            self.login_account,
            self.project_metadata().project_metadata,
            where=f"the Cloud OS Login API ({self.describe_endpoint()})",
            unreachable_hint=self.unreachable_hint(),
        )

    # -- SSH ----------------------------------------------------------------------
    def ssh(self) -> SshApi:
        """tpuctl's SSH client, with the OS Login adapter for nodes that use it."""
        from tpuctl.cloud.ssh import SshApi

        return SshApi(self.ssh_port, oslogin=self.oslogin())

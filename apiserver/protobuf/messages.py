"""Field numbers and types of the Kubernetes messages kubelab decodes from protobuf bodies.

Interoperability data, written down from k8s.io/api's and k8s.io/apimachinery's generated.proto
(core/v1, apps/v1, batch/v1, autoscaling/v1, rbac/v1, authorization/v1, authentication/v1, certificates/v1, networking/v1, storage/v1, meta/v1; field numbers as of Kubernetes 1.34). It
covers what kubectl's generators send as protobuf (`create namespace|deployment|service|configmap|secret|
serviceaccount`, `run`, `expose`, `scale`, `auth can-i`, `auth whoami`, `create token`) and the types those reach; volume sources beyond the common
ones (hostPath, emptyDir, secret, configMap, projected, PVC, NFS, CSI, ephemeral, image, downward API)
are left out and decode as an unknown field.

One line per field, as in the .proto:

    <number> <json name> <type> [*] [inline]

`type` is a scalar (string, bytes, bool, int32, int64), a message of this table, one of the
well-known messages the decoder handles itself (Time, MicroTime, IntOrString, Quantity, FieldsV1),
`[]T` for a repeated field or `map[string]T` for a map. The JSON the Go types would produce drops a
zero scalar (`omitempty`) unless it is a pointer or a required field: `*` marks those, whose zero
value is meaningful (`replicas: 0`, `automountServiceAccountToken: false`, `port: 0`). `inline` is an
embedded struct whose fields sit in the parent's JSON object (`Probe.ProbeHandler`,
`Volume.VolumeSource`, `*.LocalObjectReference`); its name is `-`.
"""

from __future__ import annotations

from dataclasses import dataclass

_TABLE = """
# --- meta/v1 ---------------------------------------------------------------------------------
ObjectMeta
  1 name string
  2 generateName string
  3 namespace string
  4 selfLink string
  5 uid string
  6 resourceVersion string
  7 generation int64
  8 creationTimestamp Time
  9 deletionTimestamp Time
  10 deletionGracePeriodSeconds int64 *
  11 labels map[string]string
  12 annotations map[string]string
  13 ownerReferences []OwnerReference
  14 finalizers []string
  17 managedFields []ManagedFieldsEntry
OwnerReference
  5 apiVersion string *
  1 kind string *
  3 name string *
  4 uid string *
  6 controller bool *
  7 blockOwnerDeletion bool *
ManagedFieldsEntry
  1 manager string
  2 operation string
  3 apiVersion string
  4 time Time
  6 fieldsType string
  7 fieldsV1 FieldsV1
  8 subresource string
LabelSelector
  1 matchLabels map[string]string
  2 matchExpressions []LabelSelectorRequirement
LabelSelectorRequirement
  1 key string *
  2 operator string *
  3 values []string
Condition
  1 type string *
  2 status string *
  3 observedGeneration int64
  4 lastTransitionTime Time
  5 reason string *
  6 message string *
DeleteOptions
  1 gracePeriodSeconds int64 *
  2 preconditions Preconditions
  3 orphanDependents bool *
  4 propagationPolicy string *
  5 dryRun []string
  6 ignoreStoreReadErrorWithClusterBreakingPotential bool *
Preconditions
  1 uid string *
  2 resourceVersion string *

# --- core/v1: Namespace, Service, ConfigMap, Secret, ServiceAccount ------------------------------
Namespace
  1 metadata ObjectMeta
  2 spec NamespaceSpec
  3 status NamespaceStatus
NamespaceSpec
  1 finalizers []string
NamespaceStatus
  1 phase string
  2 conditions []NamespaceCondition
NamespaceCondition
  1 type string *
  2 status string *
  4 lastTransitionTime Time
  5 reason string
  6 message string
Service
  1 metadata ObjectMeta
  2 spec ServiceSpec
  3 status ServiceStatus
ServiceSpec
  1 ports []ServicePort
  2 selector map[string]string
  3 clusterIP string
  18 clusterIPs []string
  4 type string
  5 externalIPs []string
  7 sessionAffinity string
  8 loadBalancerIP string
  9 loadBalancerSourceRanges []string
  10 externalName string
  11 externalTrafficPolicy string
  12 healthCheckNodePort int32
  13 publishNotReadyAddresses bool
  14 sessionAffinityConfig SessionAffinityConfig
  19 ipFamilies []string
  17 ipFamilyPolicy string *
  20 allocateLoadBalancerNodePorts bool *
  21 loadBalancerClass string *
  22 internalTrafficPolicy string *
  23 trafficDistribution string *
ServicePort
  1 name string
  2 protocol string
  6 appProtocol string *
  3 port int32 *
  4 targetPort IntOrString
  5 nodePort int32
SessionAffinityConfig
  1 clientIP ClientIPConfig
ClientIPConfig
  1 timeoutSeconds int32 *
ServiceStatus
  1 loadBalancer LoadBalancerStatus
  2 conditions []Condition
LoadBalancerStatus
  1 ingress []LoadBalancerIngress
LoadBalancerIngress
  1 ip string
  2 hostname string
  3 ipMode string *
  4 ports []PortStatus
PortStatus
  1 port int32 *
  2 protocol string *
  3 error string *
ConfigMap
  1 metadata ObjectMeta
  4 immutable bool *
  2 data map[string]string
  3 binaryData map[string]bytes
Secret
  1 metadata ObjectMeta
  5 immutable bool *
  2 data map[string]bytes
  4 stringData map[string]string
  3 type string
ServiceAccount
  1 metadata ObjectMeta
  2 secrets []ObjectReference
  3 imagePullSecrets []LocalObjectReference
  4 automountServiceAccountToken bool *
ObjectReference
  1 kind string
  2 namespace string
  3 name string
  4 uid string
  5 apiVersion string
  6 resourceVersion string
  7 fieldPath string
LocalObjectReference
  1 name string

# --- core/v1: Pod ------------------------------------------------------------------------------
Pod
  1 metadata ObjectMeta
  2 spec PodSpec
  3 status PodStatus
PodTemplateSpec
  1 metadata ObjectMeta
  2 spec PodSpec
PodSpec
  1 volumes []Volume
  20 initContainers []Container
  2 containers []Container
  34 ephemeralContainers []EphemeralContainer
  3 restartPolicy string
  4 terminationGracePeriodSeconds int64 *
  5 activeDeadlineSeconds int64 *
  6 dnsPolicy string
  7 nodeSelector map[string]string
  8 serviceAccountName string
  9 serviceAccount string
  21 automountServiceAccountToken bool *
  10 nodeName string
  11 hostNetwork bool
  12 hostPID bool
  13 hostIPC bool
  27 shareProcessNamespace bool *
  14 securityContext PodSecurityContext
  15 imagePullSecrets []LocalObjectReference
  16 hostname string
  17 subdomain string
  18 affinity Affinity
  19 schedulerName string
  22 tolerations []Toleration
  23 hostAliases []HostAlias
  24 priorityClassName string
  25 priority int32 *
  26 dnsConfig PodDNSConfig
  28 readinessGates []PodReadinessGate
  29 runtimeClassName string *
  30 enableServiceLinks bool *
  31 preemptionPolicy string *
  32 overhead map[string]Quantity
  33 topologySpreadConstraints []TopologySpreadConstraint
  35 setHostnameAsFQDN bool *
  36 os PodOS
  37 hostUsers bool *
  38 schedulingGates []PodSchedulingGate
  39 resourceClaims []PodResourceClaim
  40 resources ResourceRequirements
  41 hostnameOverride string *
  43 schedulingGroup PodSchedulingGroup
Container
  1 name string *
  2 image string
  3 command []string
  4 args []string
  5 workingDir string
  6 ports []ContainerPort
  19 envFrom []EnvFromSource
  7 env []EnvVar
  8 resources ResourceRequirements
  23 resizePolicy []ContainerResizePolicy
  24 restartPolicy string *
  25 restartPolicyRules []ContainerRestartRule
  9 volumeMounts []VolumeMount
  21 volumeDevices []VolumeDevice
  10 livenessProbe Probe
  11 readinessProbe Probe
  22 startupProbe Probe
  12 lifecycle Lifecycle
  13 terminationMessagePath string
  20 terminationMessagePolicy string
  14 imagePullPolicy string
  15 securityContext SecurityContext
  16 stdin bool
  17 stdinOnce bool
  18 tty bool
EphemeralContainer
  1 - EphemeralContainerCommon inline
  2 targetContainerName string
EphemeralContainerCommon = Container
ContainerPort
  1 name string
  2 hostPort int32
  3 containerPort int32 *
  4 protocol string
  5 hostIP string
ContainerResizePolicy
  1 resourceName string *
  2 restartPolicy string *
ContainerRestartRule
  1 action string *
  2 exitCodes ContainerRestartRuleOnExitCodes
ContainerRestartRuleOnExitCodes
  1 operator string *
  2 values []int32
EnvFromSource
  1 prefix string
  2 configMapRef ConfigMapEnvSource
  3 secretRef SecretEnvSource
ConfigMapEnvSource
  1 - LocalObjectReference inline
  2 optional bool *
SecretEnvSource = ConfigMapEnvSource
EnvVar
  1 name string *
  2 value string
  3 valueFrom EnvVarSource
EnvVarSource
  1 fieldRef ObjectFieldSelector
  2 resourceFieldRef ResourceFieldSelector
  3 configMapKeyRef ConfigMapKeySelector
  4 secretKeyRef SecretKeySelector
  5 fileKeyRef FileKeySelector
ObjectFieldSelector
  1 apiVersion string
  2 fieldPath string *
ResourceFieldSelector
  1 containerName string
  2 resource string *
  3 divisor Quantity
ConfigMapKeySelector
  1 - LocalObjectReference inline
  2 key string *
  3 optional bool *
SecretKeySelector = ConfigMapKeySelector
FileKeySelector
  1 volumeName string *
  2 path string *
  3 key string *
  4 optional bool *
ResourceRequirements
  1 limits map[string]Quantity
  2 requests map[string]Quantity
  3 claims []ResourceClaim
ResourceClaim
  1 name string *
  2 request string
VolumeMount
  1 name string *
  2 readOnly bool
  7 recursiveReadOnly string *
  3 mountPath string *
  4 subPath string
  5 mountPropagation string *
  6 subPathExpr string
VolumeDevice
  1 name string *
  2 devicePath string *
Probe
  1 - ProbeHandler inline
  2 initialDelaySeconds int32
  3 timeoutSeconds int32
  4 periodSeconds int32
  5 successThreshold int32
  6 failureThreshold int32
  7 terminationGracePeriodSeconds int64 *
ProbeHandler
  1 exec ExecAction
  2 httpGet HTTPGetAction
  3 tcpSocket TCPSocketAction
  4 grpc GRPCAction
ExecAction
  1 command []string
HTTPGetAction
  1 path string
  2 port IntOrString
  3 host string
  4 scheme string
  5 httpHeaders []HTTPHeader
HTTPHeader
  1 name string *
  2 value string *
TCPSocketAction
  1 port IntOrString
  2 host string
GRPCAction
  1 port int32 *
  2 service string *
Lifecycle
  1 postStart LifecycleHandler
  2 preStop LifecycleHandler
  3 stopSignal string *
LifecycleHandler
  1 exec ExecAction
  2 httpGet HTTPGetAction
  3 tcpSocket TCPSocketAction
  4 sleep SleepAction
SleepAction
  1 seconds int64 *
SecurityContext
  1 capabilities Capabilities
  2 privileged bool *
  3 seLinuxOptions SELinuxOptions
  10 windowsOptions WindowsSecurityContextOptions
  4 runAsUser int64 *
  8 runAsGroup int64 *
  5 runAsNonRoot bool *
  6 readOnlyRootFilesystem bool *
  7 allowPrivilegeEscalation bool *
  9 procMount string *
  11 seccompProfile SeccompProfile
  12 appArmorProfile AppArmorProfile
Capabilities
  1 add []string
  2 drop []string
SELinuxOptions
  1 user string
  2 role string
  3 type string
  4 level string
WindowsSecurityContextOptions
  1 gmsaCredentialSpecName string *
  2 gmsaCredentialSpec string *
  3 runAsUserName string *
  4 hostProcess bool *
SeccompProfile
  1 type string *
  2 localhostProfile string *
AppArmorProfile = SeccompProfile
PodSecurityContext
  1 seLinuxOptions SELinuxOptions
  8 windowsOptions WindowsSecurityContextOptions
  2 runAsUser int64 *
  6 runAsGroup int64 *
  3 runAsNonRoot bool *
  4 supplementalGroups []int64
  12 supplementalGroupsPolicy string *
  5 fsGroup int64 *
  7 sysctls []Sysctl
  9 fsGroupChangePolicy string *
  10 seccompProfile SeccompProfile
  11 appArmorProfile AppArmorProfile
  13 seLinuxChangePolicy string *
Sysctl
  1 name string *
  2 value string *
Affinity
  1 nodeAffinity NodeAffinity
  2 podAffinity PodAffinity
  3 podAntiAffinity PodAntiAffinity
NodeAffinity
  1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector
  2 preferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm
NodeSelector
  1 nodeSelectorTerms []NodeSelectorTerm
NodeSelectorTerm
  1 matchExpressions []NodeSelectorRequirement
  2 matchFields []NodeSelectorRequirement
NodeSelectorRequirement
  1 key string *
  2 operator string *
  3 values []string
PreferredSchedulingTerm
  1 weight int32 *
  2 preference NodeSelectorTerm
PodAffinity
  1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm
  2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm
PodAntiAffinity = PodAffinity
PodAffinityTerm
  1 labelSelector LabelSelector
  2 namespaces []string
  3 topologyKey string *
  4 namespaceSelector LabelSelector
  5 matchLabelKeys []string
  6 mismatchLabelKeys []string
WeightedPodAffinityTerm
  1 weight int32 *
  2 podAffinityTerm PodAffinityTerm
Toleration
  1 key string
  2 operator string
  3 value string
  4 effect string
  5 tolerationSeconds int64 *
HostAlias
  1 ip string *
  2 hostnames []string
PodDNSConfig
  1 nameservers []string
  2 searches []string
  3 options []PodDNSConfigOption
PodDNSConfigOption
  1 name string
  2 value string *
PodReadinessGate
  1 conditionType string *
TopologySpreadConstraint
  1 maxSkew int32 *
  2 topologyKey string *
  3 whenUnsatisfiable string *
  4 labelSelector LabelSelector
  5 minDomains int32 *
  6 nodeAffinityPolicy string *
  7 nodeTaintsPolicy string *
  8 matchLabelKeys []string
PodOS
  1 name string *
PodSchedulingGate
  1 name string *
PodResourceClaim
  1 name string *
  3 resourceClaimName string *
  4 resourceClaimTemplateName string *
PodSchedulingGroup
  1 podGroupName string *
Volume
  1 name string *
  2 - VolumeSource inline
VolumeSource
  1 hostPath HostPathVolumeSource
  2 emptyDir EmptyDirVolumeSource
  6 secret SecretVolumeSource
  7 nfs NFSVolumeSource
  10 persistentVolumeClaim PersistentVolumeClaimVolumeSource
  16 downwardAPI DownwardAPIVolumeSource
  19 configMap ConfigMapVolumeSource
  26 projected ProjectedVolumeSource
  28 csi CSIVolumeSource
  29 ephemeral EphemeralVolumeSource
  30 image ImageVolumeSource
HostPathVolumeSource
  1 path string *
  2 type string *
EmptyDirVolumeSource
  1 medium string
  2 sizeLimit Quantity
SecretVolumeSource
  1 secretName string
  2 items []KeyToPath
  3 defaultMode int32 *
  4 optional bool *
NFSVolumeSource
  1 server string *
  2 path string *
  3 readOnly bool
PersistentVolumeClaimVolumeSource
  1 claimName string *
  2 readOnly bool
DownwardAPIVolumeSource
  1 items []DownwardAPIVolumeFile
  2 defaultMode int32 *
DownwardAPIVolumeFile
  1 path string *
  2 fieldRef ObjectFieldSelector
  3 resourceFieldRef ResourceFieldSelector
  4 mode int32 *
ConfigMapVolumeSource
  1 - LocalObjectReference inline
  2 items []KeyToPath
  3 defaultMode int32 *
  4 optional bool *
KeyToPath
  1 key string *
  2 path string *
  3 mode int32 *
ProjectedVolumeSource
  1 sources []VolumeProjection
  2 defaultMode int32 *
VolumeProjection
  1 secret SecretProjection
  2 downwardAPI DownwardAPIProjection
  3 configMap ConfigMapProjection
  4 serviceAccountToken ServiceAccountTokenProjection
  5 clusterTrustBundle ClusterTrustBundleProjection
SecretProjection
  1 - LocalObjectReference inline
  2 items []KeyToPath
  4 optional bool *
ConfigMapProjection = SecretProjection
DownwardAPIProjection
  1 items []DownwardAPIVolumeFile
ServiceAccountTokenProjection
  1 audience string
  2 expirationSeconds int64 *
  3 path string *
ClusterTrustBundleProjection
  1 name string *
  2 signerName string *
  3 labelSelector LabelSelector
  5 optional bool *
  4 path string *
CSIVolumeSource
  1 driver string *
  2 readOnly bool *
  3 fsType string *
  4 volumeAttributes map[string]string
  5 nodePublishSecretRef LocalObjectReference
EphemeralVolumeSource
  1 volumeClaimTemplate PersistentVolumeClaimTemplate
PersistentVolumeClaimTemplate
  1 metadata ObjectMeta
  2 spec PersistentVolumeClaimSpec
PersistentVolumeClaimSpec
  1 accessModes []string
  4 selector LabelSelector
  2 resources VolumeResourceRequirements
  3 volumeName string
  5 storageClassName string *
  6 volumeMode string *
  7 dataSource TypedLocalObjectReference
  8 dataSourceRef TypedObjectReference
  9 volumeAttributesClassName string *
VolumeResourceRequirements
  1 limits map[string]Quantity
  2 requests map[string]Quantity
TypedLocalObjectReference
  1 apiGroup string *
  2 kind string *
  3 name string *
TypedObjectReference
  1 apiGroup string *
  2 kind string *
  3 name string *
  4 namespace string *
ImageVolumeSource
  1 reference string
  2 pullPolicy string
PodStatus
  17 observedGeneration int64
  1 phase string
  2 conditions []PodCondition
  3 message string
  4 reason string
  11 nominatedNodeName string
  5 hostIP string
  16 hostIPs []HostIP
  6 podIP string
  12 podIPs []PodIP
  7 startTime Time
  10 initContainerStatuses []ContainerStatus
  8 containerStatuses []ContainerStatus
  9 qosClass string
  13 ephemeralContainerStatuses []ContainerStatus
  14 resize string
  15 resourceClaimStatuses []PodResourceClaimStatus
  19 allocatedResources map[string]Quantity
  20 resources ResourceRequirements
PodCondition
  1 type string *
  7 observedGeneration int64
  2 status string *
  3 lastProbeTime Time
  4 lastTransitionTime Time
  5 reason string
  6 message string
HostIP
  1 ip string *
PodIP = HostIP
ContainerStatus
  1 name string *
  2 state ContainerState
  3 lastState ContainerState
  4 ready bool *
  5 restartCount int32 *
  6 image string *
  7 imageID string *
  8 containerID string
  9 started bool *
  10 allocatedResources map[string]Quantity
  11 resources ResourceRequirements
  15 stopSignal string *
ContainerState
  1 waiting ContainerStateWaiting
  2 running ContainerStateRunning
  3 terminated ContainerStateTerminated
ContainerStateWaiting
  1 reason string
  2 message string
ContainerStateRunning
  1 startedAt Time
ContainerStateTerminated
  1 exitCode int32 *
  2 signal int32
  3 reason string
  4 message string
  5 startedAt Time
  6 finishedAt Time
  7 containerID string
PodResourceClaimStatus
  1 name string *
  2 resourceClaimName string *

# --- apps/v1 -------------------------------------------------------------------------------------
Deployment
  1 metadata ObjectMeta
  2 spec DeploymentSpec
  3 status DeploymentStatus
DeploymentSpec
  1 replicas int32 *
  2 selector LabelSelector
  3 template PodTemplateSpec
  4 strategy DeploymentStrategy
  5 minReadySeconds int32
  6 revisionHistoryLimit int32 *
  7 paused bool
  9 progressDeadlineSeconds int32 *
DeploymentStrategy
  1 type string
  2 rollingUpdate RollingUpdateDeployment
RollingUpdateDeployment
  1 maxUnavailable IntOrString
  2 maxSurge IntOrString
DeploymentStatus
  1 observedGeneration int64
  2 replicas int32
  3 updatedReplicas int32
  7 readyReplicas int32
  4 availableReplicas int32
  5 unavailableReplicas int32
  9 terminatingReplicas int32 *
  6 conditions []DeploymentCondition
  8 collisionCount int32 *
DeploymentCondition
  1 type string *
  2 status string *
  6 lastUpdateTime Time
  7 lastTransitionTime Time
  4 reason string
  5 message string
ReplicaSet
  1 metadata ObjectMeta
  2 spec ReplicaSetSpec
  3 status ReplicaSetStatus
ReplicaSetSpec
  1 replicas int32 *
  4 minReadySeconds int32
  2 selector LabelSelector
  3 template PodTemplateSpec
ReplicaSetStatus
  1 replicas int32 *
  2 fullyLabeledReplicas int32
  4 readyReplicas int32
  5 availableReplicas int32
  7 terminatingReplicas int32 *
  3 observedGeneration int64
  6 conditions []ReplicaSetCondition
ReplicaSetCondition
  1 type string *
  2 status string *
  3 lastTransitionTime Time
  4 reason string
  5 message string

# --- batch/v1: what `kubectl create job|cronjob` and `create job --from=cronjob/X` send ----------
Job
  1 metadata ObjectMeta
  2 spec JobSpec
  3 status JobStatus
JobSpec
  1 parallelism int32 *
  2 completions int32 *
  3 activeDeadlineSeconds int64 *
  11 podFailurePolicy PodFailurePolicy
  16 successPolicy SuccessPolicy
  7 backoffLimit int32 *
  12 backoffLimitPerIndex int32 *
  13 maxFailedIndexes int32 *
  4 selector LabelSelector
  5 manualSelector bool *
  6 template PodTemplateSpec
  8 ttlSecondsAfterFinished int32 *
  9 completionMode string *
  10 suspend bool *
  14 podReplacementPolicy string *
  15 managedBy string *
SuccessPolicy
  1 rules []SuccessPolicyRule
SuccessPolicyRule
  1 succeededIndexes string *
  2 succeededCount int32 *
PodFailurePolicy
  1 rules []PodFailurePolicyRule
PodFailurePolicyRule
  1 action string
  2 onExitCodes PodFailurePolicyOnExitCodesRequirement
  3 onPodConditions []PodFailurePolicyOnPodConditionsPattern
PodFailurePolicyOnExitCodesRequirement
  1 containerName string *
  2 operator string
  3 values []int32
PodFailurePolicyOnPodConditionsPattern
  1 type string
  2 status string
JobStatus
  1 conditions []JobCondition
  2 startTime Time
  3 completionTime Time
  4 active int32
  5 succeeded int32
  6 failed int32
  11 terminating int32 *
  7 completedIndexes string
  10 failedIndexes string *
  8 uncountedTerminatedPods UncountedTerminatedPods
  9 ready int32 *
JobCondition
  1 type string *
  2 status string *
  3 lastProbeTime Time
  4 lastTransitionTime Time
  5 reason string
  6 message string
UncountedTerminatedPods
  1 succeeded []string
  2 failed []string
CronJob
  1 metadata ObjectMeta
  2 spec CronJobSpec
  3 status CronJobStatus
CronJobSpec
  1 schedule string *
  8 timeZone string *
  2 startingDeadlineSeconds int64 *
  3 concurrencyPolicy string
  4 suspend bool *
  5 jobTemplate JobTemplateSpec
  6 successfulJobsHistoryLimit int32 *
  7 failedJobsHistoryLimit int32 *
JobTemplateSpec
  1 metadata ObjectMeta
  2 spec JobSpec
CronJobStatus
  1 active []ObjectReference
  4 lastScheduleTime Time
  5 lastSuccessfulTime Time

# --- rbac.authorization.k8s.io/v1: `kubectl create role|clusterrole|rolebinding|clusterrolebinding` --------
Role
  1 metadata ObjectMeta
  2 rules []PolicyRule
ClusterRole
  1 metadata ObjectMeta
  2 rules []PolicyRule
  3 aggregationRule AggregationRule
PolicyRule
  1 verbs []string
  2 apiGroups []string
  3 resources []string
  4 resourceNames []string
  5 nonResourceURLs []string
AggregationRule
  1 clusterRoleSelectors []LabelSelector
RoleBinding
  1 metadata ObjectMeta
  2 subjects []Subject
  3 roleRef RoleRef
ClusterRoleBinding = RoleBinding
Subject
  1 kind string *
  2 apiGroup string
  3 name string *
  4 namespace string
RoleRef
  1 apiGroup string *
  2 kind string *
  3 name string *

# --- authorization/v1: what `kubectl auth can-i` sends --------------------------------------------
SelfSubjectAccessReview
  1 metadata ObjectMeta
  2 spec SelfSubjectAccessReviewSpec
  3 status SubjectAccessReviewStatus
SelfSubjectAccessReviewSpec
  1 resourceAttributes ResourceAttributes
  2 nonResourceAttributes NonResourceAttributes
ResourceAttributes
  1 namespace string
  2 verb string
  3 group string
  4 version string
  5 resource string
  6 subresource string
  7 name string
  8 fieldSelector FieldSelectorAttributes
  9 labelSelector LabelSelectorAttributes
FieldSelectorAttributes
  1 rawSelector string
  2 requirements []FieldSelectorRequirement
FieldSelectorRequirement
  1 key string
  2 operator string
  3 values []string
LabelSelectorAttributes
  1 rawSelector string
  2 requirements []LabelSelectorRequirement
NonResourceAttributes
  1 path string
  2 verb string
SubjectAccessReviewStatus
  1 allowed bool *
  4 denied bool
  2 reason string
  3 evaluationError string

SelfSubjectRulesReview
  1 metadata ObjectMeta
  2 spec SelfSubjectRulesReviewSpec
  3 status SubjectRulesReviewStatus
SelfSubjectRulesReviewSpec
  1 namespace string
SubjectRulesReviewStatus
  1 resourceRules []ResourceRule
  2 nonResourceRules []NonResourceRule
  3 incomplete bool *
  4 evaluationError string
ResourceRule
  1 verbs []string
  2 apiGroups []string
  3 resources []string
  4 resourceNames []string
NonResourceRule
  1 verbs []string
  2 nonResourceURLs []string
SubjectAccessReview
  1 metadata ObjectMeta
  2 spec SubjectAccessReviewSpec
  3 status SubjectAccessReviewStatus
LocalSubjectAccessReview = SubjectAccessReview
SubjectAccessReviewSpec
  1 resourceAttributes ResourceAttributes
  2 nonResourceAttributes NonResourceAttributes
  3 user string
  4 groups []string
  6 uid string

# --- authentication/v1: what `kubectl create token` sends ---------------------------------------
TokenRequest
  1 metadata ObjectMeta
  2 spec TokenRequestSpec
  3 status TokenRequestStatus
TokenRequestSpec
  1 audiences []string
  4 expirationSeconds int64 *
  3 boundObjectRef BoundObjectReference
BoundObjectReference
  1 kind string
  2 apiVersion string
  3 name string
  4 uid string
TokenRequestStatus
  1 token string
  2 expirationTimestamp Time

SelfSubjectReview
  1 metadata ObjectMeta
  2 status SelfSubjectReviewStatus
SelfSubjectReviewStatus
  1 userInfo UserInfo
UserInfo
  1 username string
  2 uid string
  3 groups []string

# --- autoscaling/v1 ------------------------------------------------------------------------------
Scale
  1 metadata ObjectMeta
  2 spec ScaleSpec
  3 status ScaleStatus
ScaleSpec
  1 replicas int32
ScaleStatus
  1 replicas int32 *
  2 selector string

# --- networking.k8s.io/v1: `kubectl create ingress` -------------------------------------------
Ingress
  1 metadata ObjectMeta
  2 spec IngressSpec
  3 status IngressStatus
IngressSpec
  1 defaultBackend IngressBackend
  2 tls []IngressTLS
  3 rules []IngressRule
  4 ingressClassName string *
IngressBackend
  3 resource TypedLocalObjectReference
  4 service IngressServiceBackend
TypedLocalObjectReference
  1 apiGroup string *
  2 kind string
  3 name string
IngressServiceBackend
  1 name string
  2 port ServiceBackendPort
ServiceBackendPort
  1 name string
  2 number int32
IngressTLS
  1 hosts []string
  2 secretName string
IngressRule
  1 host string
  2 - IngressRuleValue inline
IngressRuleValue
  1 http HTTPIngressRuleValue
HTTPIngressRuleValue
  1 paths []HTTPIngressPath
HTTPIngressPath
  1 path string
  2 backend IngressBackend
  3 pathType string *
IngressStatus
  1 loadBalancer IngressLoadBalancerStatus
IngressLoadBalancerStatus
  1 ingress []IngressLoadBalancerIngress
IngressLoadBalancerIngress
  1 ip string
  2 hostname string
  4 ports []IngressPortStatus
IngressPortStatus
  1 port int32 *
  2 protocol string *
  3 error string *
IngressClass
  1 metadata ObjectMeta
  2 spec IngressClassSpec
IngressClassSpec
  1 controller string
  2 parameters IngressClassParametersReference
IngressClassParametersReference
  1 apiGroup string *
  2 kind string
  3 name string
  4 scope string *
  5 namespace string *
NetworkPolicy
  1 metadata ObjectMeta
  2 spec NetworkPolicySpec
NetworkPolicySpec
  1 podSelector LabelSelector
  2 ingress []NetworkPolicyIngressRule
  3 egress []NetworkPolicyEgressRule
  4 policyTypes []string
NetworkPolicyIngressRule
  1 ports []NetworkPolicyPort
  2 from []NetworkPolicyPeer
NetworkPolicyEgressRule
  1 ports []NetworkPolicyPort
  2 to []NetworkPolicyPeer
NetworkPolicyPort
  1 protocol string *
  2 port IntOrString
  3 endPort int32 *
NetworkPolicyPeer
  1 podSelector LabelSelector
  2 namespaceSelector LabelSelector
  3 ipBlock IPBlock
IPBlock
  1 cidr string
  2 except []string

# --- storage.k8s.io/v1 (what a CSI driver's external-provisioner writes through client-go) ----------
CSIStorageCapacity
  1 metadata ObjectMeta
  2 nodeTopology LabelSelector
  3 storageClassName string
  4 capacity Quantity
  5 maximumVolumeSize Quantity

# --- certificates.k8s.io/v1: `kubectl certificate approve|deny` (the whole object, to the approval
# subresource). spec.extra (6, map of ExtraValue) is left out: the API server sets it from the requestor.
CertificateSigningRequest
  1 metadata ObjectMeta
  2 spec CertificateSigningRequestSpec
  3 status CertificateSigningRequestStatus
CertificateSigningRequestSpec
  1 request bytes
  2 username string
  3 uid string
  4 groups []string
  5 usages []string
  7 signerName string
  8 expirationSeconds int32 *
CertificateSigningRequestStatus
  1 conditions []CertificateSigningRequestCondition
  2 certificate bytes
CertificateSigningRequestCondition
  1 type string
  2 reason string
  3 message string
  4 lastUpdateTime Time
  5 lastTransitionTime Time
  6 status string
"""

# The messages a request body may carry at its top level, by (apiVersion, kind) of its TypeMeta.
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Service"): "Service",
    ("v1", "Pod"): "Pod",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("autoscaling/v1", "Scale"): "Scale",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("authorization.k8s.io/v1", "SubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): "LocalSubjectAccessReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): "CertificateSigningRequest",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("networking.k8s.io/v1", "IngressClass"): "IngressClass",
    ("networking.k8s.io/v1", "NetworkPolicy"): "NetworkPolicy",
    ("storage.k8s.io/v1", "CSIStorageCapacity"): "CSIStorageCapacity",
    ("v1", "DeleteOptions"): "DeleteOptions",
    ("meta.k8s.io/v1", "DeleteOptions"): "DeleteOptions",
}

SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64"})
WELL_KNOWN = frozenset({"Time", "MicroTime", "IntOrString", "Quantity", "FieldsV1"})


@dataclass(frozen=True)
class Field:
    json_name: str            # "-" for an inline field
    type: str                 # the element type for repeated fields and the value type for maps
    repeated: bool = False
    map: bool = False
    keep_zero: bool = False   # pointer or required field: a zero value is kept, not dropped
    inline: bool = False


Message = dict[int, Field]


def _parse_type(text: str) -> tuple[str, bool, bool]:
    if text.startswith("[]"):
        return text[2:], True, False
    if text.startswith("map[string]"):
        return text[len("map[string]"):], False, True
    return text, False, False


def _parse(table: str) -> dict[str, Message]:
    messages: dict[str, Message] = {}
    aliases: dict[str, str] = {}
    current: Message | None = None
    for raw in table.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith(" "):
            name, _, alias = line.partition("=")
            if alias:
                aliases[name.strip()] = alias.strip()
                current = None
            else:
                current = messages.setdefault(name.strip(), {})
            continue
        if current is None:
            raise ValueError(f"field outside a message: {raw!r}")
        number, json_name, type_text, *flags = line.split()
        type_, repeated, is_map = _parse_type(type_text)
        current[int(number)] = Field(json_name, type_, repeated, is_map, "*" in flags, "inline" in flags)
    for name, target in aliases.items():
        messages[name] = messages[target]
    for name, message in messages.items():
        for field_number, spec in message.items():
            if spec.type not in SCALARS | WELL_KNOWN and spec.type not in messages:
                raise ValueError(f"{name}.{field_number}: unknown type {spec.type}")
    return messages


MESSAGES: dict[str, Message] = _parse(_TABLE)

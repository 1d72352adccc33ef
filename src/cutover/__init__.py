"""cutover: hand a stable Kubernetes Service name from one LLM engine's pods to another's, through GitOps.

The public surface is small on purpose: the CLI is the product; these names are for embedding and tests.
Importing the package stays light (no Kubernetes client, no HTTP client) so that `cutover --help` is fast.
"""

from cutover.errors import CutoverError, ExitCode

__version__ = "0.1.0"
__all__ = ["CutoverError", "ExitCode", "__version__"]

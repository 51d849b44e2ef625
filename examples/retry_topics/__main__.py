import sys

from examples.retry_topics.retry import main

sys.exit(main())

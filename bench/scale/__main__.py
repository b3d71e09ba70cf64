from bench.scale.runner import main

raise SystemExit(main())

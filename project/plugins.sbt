addSbtPlugin("com.eed3si9n" % "sbt-assembly" % "2.3.1")
// scalafmtCheckAll (dev/lint): the Scala sources' format, as .scalafmt.conf describes it.
addSbtPlugin("org.scalameta" % "sbt-scalafmt" % "2.5.6")
